// Peer credentials on macOS: getpeereid() for uid/gid, LOCAL_PEERPID for the pid
// (available since macOS 10.8). Compiled only on macOS; it cannot be built on the
// Linux CI, so it is kept to the two calls it needs.
#include <napi.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include "../common/errors.h"
#include "../common/platform.h"

namespace stash {
namespace {

Napi::Value PeerCredentials(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = info[0].As<Napi::Number>().Int32Value();
  uid_t uid = 0;
  gid_t gid = 0;
  if (getpeereid(fd, &uid, &gid) != 0) ThrowErrno(env, "getpeereid", errno);
  pid_t pid = 0;
  socklen_t len = sizeof(pid);
  if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &pid, &len) != 0) {
    ThrowErrno(env, "getsockopt(LOCAL_PEERPID)", errno);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("pid", Napi::Number::New(env, pid));
  out.Set("uid", Napi::Number::New(env, uid));
  out.Set("gid", Napi::Number::New(env, gid));
  return out;
}

}  // namespace

void InitPeer(Napi::Env env, Napi::Object exports) {
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentials, "peerCredentials"));
}

}  // namespace stash
