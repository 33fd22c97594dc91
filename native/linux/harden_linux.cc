// Process hardening on Linux: no core dumps and no same-user ptrace.
// PR_SET_DUMPABLE 0 also makes /proc/<pid>/mem and ptrace attach require
// CAP_SYS_PTRACE, so another process of the same user cannot read the keys.
#include <napi.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cerrno>

#include "../common/errors.h"
#include "../common/platform.h"

namespace stash {
namespace {

Napi::Value Limit(Napi::Env env, int resource) {
  struct rlimit lim {};
  if (getrlimit(resource, &lim) != 0) ThrowErrno(env, "getrlimit", errno);
  Napi::Object out = Napi::Object::New(env);
  // RLIM_INFINITY does not fit a double exactly; report it as -1.
  out.Set("soft", Napi::Number::New(env, lim.rlim_cur == RLIM_INFINITY ? -1.0 : double(lim.rlim_cur)));
  out.Set("hard", Napi::Number::New(env, lim.rlim_max == RLIM_INFINITY ? -1.0 : double(lim.rlim_max)));
  return out;
}

Napi::Object Posture(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  if (dumpable < 0) ThrowErrno(env, "prctl(PR_GET_DUMPABLE)", errno);
  out.Set("dumpable", Napi::Boolean::New(env, dumpable != 0));
  out.Set("coreLimit", Limit(env, RLIMIT_CORE));
  out.Set("memlockLimit", Limit(env, RLIMIT_MEMLOCK));
  return out;
}

Napi::Value HardenProcess(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct rlimit none {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0) ThrowErrno(env, "setrlimit(RLIMIT_CORE)", errno);
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) ThrowErrno(env, "prctl(PR_SET_DUMPABLE)", errno);
  Napi::Object out = Posture(env);
  Napi::Array actions = Napi::Array::New(env);
  actions.Set(0u, Napi::String::New(env, "setrlimit(RLIMIT_CORE, 0)"));
  actions.Set(1u, Napi::String::New(env, "prctl(PR_SET_DUMPABLE, 0)"));
  out.Set("actions", actions);
  out.Set("coreDumpsDisabled", Napi::Boolean::New(env, true));
  out.Set("ptraceBlocked", Napi::Boolean::New(env, true));
  return out;
}

Napi::Value ProcessPosture(const Napi::CallbackInfo& info) { return Posture(info.Env()); }

}  // namespace

void InitHarden(Napi::Env env, Napi::Object exports) {
  exports.Set("hardenProcess", Napi::Function::New(env, HardenProcess, "hardenProcess"));
  exports.Set("processPosture", Napi::Function::New(env, ProcessPosture, "processPosture"));
}

}  // namespace stash
