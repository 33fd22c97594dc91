// Process identity on macOS, for the activity registry (src/agent/proc-info/darwin.ts):
//
//   processInfo(pid) -> {ppid, startTime, zombie} | null   (sysctl KERN_PROC_PID)
//
// startTime is p_starttime as "sec.usec": with the pid it names one process for
// the life of the boot. Compile-checked on the Linux CI, never run there.
#include <napi.h>
#include <sys/sysctl.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdio>

#include "../common/errors.h"
#include "../common/platform.h"

namespace stash {
namespace {

Napi::Value ProcessInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, info[0].As<Napi::Number>().Int32Value()};
  struct kinfo_proc proc {};
  size_t len = sizeof(proc);
  if (sysctl(mib, 4, &proc, &len, nullptr, 0) != 0) ThrowErrno(env, "sysctl(KERN_PROC_PID)", errno);
  if (len == 0) return env.Null();  // no such process
  const struct timeval& t = proc.kp_proc.p_starttime;
  char start[48];
  snprintf(start, sizeof(start), "%lld.%06d", static_cast<long long>(t.tv_sec), static_cast<int>(t.tv_usec));
  Napi::Object out = Napi::Object::New(env);
  out.Set("ppid", Napi::Number::New(env, proc.kp_eproc.e_ppid));
  out.Set("startTime", Napi::String::New(env, start));
  out.Set("zombie", Napi::Boolean::New(env, proc.kp_proc.p_stat == SZOMB));
  return out;
}

}  // namespace

void InitProcess(Napi::Env env, Napi::Object exports) {
  exports.Set("processInfo", Napi::Function::New(env, ProcessInfo, "processInfo"));
}

}  // namespace stash
