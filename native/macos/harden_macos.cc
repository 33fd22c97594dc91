// Process hardening on macOS: PT_DENY_ATTACH refuses debuggers (including the
// same user's), RLIMIT_CORE 0 stops core files. macOS has no "dumpable" flag;
// the posture reports whether PT_DENY_ATTACH was applied in this process.
#include <napi.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cerrno>

#include "../common/errors.h"
#include "../common/platform.h"

namespace stash {
namespace {

bool g_denied = false;

Napi::Value Limit(Napi::Env env, int resource) {
  struct rlimit lim {};
  if (getrlimit(resource, &lim) != 0) ThrowErrno(env, "getrlimit", errno);
  Napi::Object out = Napi::Object::New(env);
  out.Set("soft", Napi::Number::New(env, lim.rlim_cur == RLIM_INFINITY ? -1.0 : double(lim.rlim_cur)));
  out.Set("hard", Napi::Number::New(env, lim.rlim_max == RLIM_INFINITY ? -1.0 : double(lim.rlim_max)));
  return out;
}

Napi::Object Posture(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("dumpable", Napi::Boolean::New(env, !g_denied));
  out.Set("coreLimit", Limit(env, RLIMIT_CORE));
  out.Set("memlockLimit", Limit(env, RLIMIT_MEMLOCK));
  return out;
}

Napi::Value HardenProcess(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct rlimit none {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0) ThrowErrno(env, "setrlimit(RLIMIT_CORE)", errno);
  if (ptrace(PT_DENY_ATTACH, 0, nullptr, 0) != 0) ThrowErrno(env, "ptrace(PT_DENY_ATTACH)", errno);
  g_denied = true;
  Napi::Object out = Posture(env);
  Napi::Array actions = Napi::Array::New(env);
  actions.Set(0u, Napi::String::New(env, "setrlimit(RLIMIT_CORE, 0)"));
  actions.Set(1u, Napi::String::New(env, "ptrace(PT_DENY_ATTACH)"));
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
