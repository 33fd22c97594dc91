// One way to fail from native code: an Error whose `code` is the system's
// name for the failure (errno name on Unix, WIN32_<n> on Windows), so the
// TypeScript side decides policy from a stable string.
#pragma once

#include <napi.h>
#include <string>

namespace stash {

// Throws Error("<syscall> failed: <strerror>") with code = errno name, syscall = syscall.
[[noreturn]] void ThrowErrno(Napi::Env env, const char* syscall, int err);

// Throws Error(message) with the given code.
[[noreturn]] void ThrowCode(Napi::Env env, const char* code, const std::string& message);

// Name of an errno value ("EBADF"); "E<n>" for values without a name here.
const char* ErrnoName(int err);

}  // namespace stash
