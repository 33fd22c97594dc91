#include "errors.h"

#include <cerrno>
#include <cstring>

namespace stash {

const char* ErrnoName(int err) {
  switch (err) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENOSYS: return "ENOSYS";
#ifdef ENOTSOCK
    case ENOTSOCK: return "ENOTSOCK";
#endif
#ifdef ENOPROTOOPT
    case ENOPROTOOPT: return "ENOPROTOOPT";
#endif
#ifdef ENOTCONN
    case ENOTCONN: return "ENOTCONN";
#endif
#ifdef ECONNREFUSED
    case ECONNREFUSED: return "ECONNREFUSED";
#endif
#ifdef EPIPE
    case EPIPE: return "EPIPE";
#endif
#ifdef ECONNRESET
    case ECONNRESET: return "ECONNRESET";
#endif
#ifdef ENAMETOOLONG
    case ENAMETOOLONG: return "ENAMETOOLONG";
#endif
#ifdef ETIMEDOUT
    case ETIMEDOUT: return "ETIMEDOUT";
#endif
    default: return nullptr;
  }
}

void ThrowErrno(Napi::Env env, const char* syscall, int err) {
  std::string message = std::string(syscall) + " failed: " + std::strerror(err);
  Napi::Error error = Napi::Error::New(env, message);
  const char* name = ErrnoName(err);
  error.Set("code", name ? Napi::String::New(env, name)
                         : Napi::String::New(env, "E" + std::to_string(err)));
  error.Set("errno", Napi::Number::New(env, err));
  error.Set("syscall", Napi::String::New(env, syscall));
  throw error;
}

void ThrowCode(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  throw error;
}

}  // namespace stash
