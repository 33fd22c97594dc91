// The agent's Windows transport: a named pipe that only the current user can
// open, served and connected natively so that its security attributes and the
// identity of the process at the other end are under our control (libuv's
// pipe server, behind net.Server, creates every instance with the default
// DACL, which grants read access to Everyone, and does not expose the
// client's process id).
//
// Exports (Windows builds only; typed in src/native/binding.ts):
//   new PipeServer(name, callback) {close()}
//       claims `name` with FILE_FLAG_FIRST_PIPE_INSTANCE, owner-only DACL and
//       PIPE_REJECT_REMOTE_CLIENTS; a thread accepts clients and checks each
//       one's user SID; the callback receives
//         {type:'connection', fd, pid}   fd: a CRT descriptor for new net.Socket({fd})
//         {type:'refused', pid, reason}  the client was disconnected
//         {type:'error', code, message}  the server stopped accepting
//   pipeConnect(name, timeoutMs) -> Promise<{fd, pid}>
//       opens the client end with SECURITY_IDENTIFICATION (a server can never
//       act as us) and resolves only if the serving process runs as our user.
#pragma once

#include <napi.h>

namespace stash {

// Adds PipeServer and pipeConnect to the exports (called from InitPeer: on
// Windows the pipe is how the agent learns who its peer is).
void InitPipe(Napi::Env env, Napi::Object exports);

}  // namespace stash
