// Peer credentials of a connected Unix socket, from the kernel (SO_PEERCRED).
// The values are those of the peer at connect() time and cannot be forged by it.
#include <napi.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>

#include "../common/errors.h"
#include "../common/platform.h"

namespace stash {
namespace {

Napi::Value PeerCredentials(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = info[0].As<Napi::Number>().Int32Value();
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    ThrowErrno(env, "getsockopt(SO_PEERCRED)", errno);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("pid", Napi::Number::New(env, cred.pid));
  out.Set("uid", Napi::Number::New(env, cred.uid));
  out.Set("gid", Napi::Number::New(env, cred.gid));
  return out;
}

}  // namespace

void InitPeer(Napi::Env env, Napi::Object exports) {
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentials, "peerCredentials"));
}

}  // namespace stash
