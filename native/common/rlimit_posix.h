// The resource limits the Unix hardening reports and sets (native/linux/harden_linux.cc,
// native/macos/harden_macos.cc): the same getrlimit/setrlimit on both.
#pragma once

#include <napi.h>
#include <sys/resource.h>

#include <cerrno>

#include "errors.h"

namespace stash {

// {soft, hard}; RLIM_INFINITY does not fit a double exactly, so it is reported as -1.
inline Napi::Value RlimitObject(Napi::Env env, int resource) {
  struct rlimit lim {};
  if (getrlimit(resource, &lim) != 0) ThrowErrno(env, "getrlimit", errno);
  Napi::Object out = Napi::Object::New(env);
  out.Set("soft", Napi::Number::New(env, lim.rlim_cur == RLIM_INFINITY ? -1.0 : double(lim.rlim_cur)));
  out.Set("hard", Napi::Number::New(env, lim.rlim_max == RLIM_INFINITY ? -1.0 : double(lim.rlim_max)));
  return out;
}

// The posture's coreLimit and memlockLimit.
inline void DescribeLimits(Napi::Env env, Napi::Object out) {
  out.Set("coreLimit", RlimitObject(env, RLIMIT_CORE));
  out.Set("memlockLimit", RlimitObject(env, RLIMIT_MEMLOCK));
}

// No core files from here on; returns the step's name for the hardening report.
inline const char* DisableCoreFiles(Napi::Env env) {
  struct rlimit none {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0) ThrowErrno(env, "setrlimit(RLIMIT_CORE)", errno);
  return "setrlimit(RLIMIT_CORE, 0)";
}

}  // namespace stash
