// Windows has no Unix-socket peer credentials. The agent listens on a named
// pipe whose DACL admits only the owner, and learns each client's identity
// from the pipe itself (GetNamedPipeClientProcessId, then the client's token
// user): see pipe_windows.cc. peerCredentials therefore throws a clear error,
// and InitPeer also installs the pipe exports.
#include <napi.h>

#include "../common/errors.h"
#include "../common/platform.h"
#include "pipe_windows.h"

namespace stash {
namespace {

Napi::Value PeerCredentials(const Napi::CallbackInfo& info) {
  ThrowCode(info.Env(), "ENOTSUP",
            "peerCredentials is not applicable on Windows: the agent uses a named pipe "
            "with an owner-only DACL and checks the client process identity instead (PipeServer)");
}

}  // namespace

void InitPeer(Napi::Env env, Napi::Object exports) {
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentials, "peerCredentials"));
  InitPipe(env, exports);
}

}  // namespace stash
