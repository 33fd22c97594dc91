// The Win32 half of the agent's named pipe, free of N-API so that it can also
// be linked into a plain Windows program (native/windows/selftest/) and run
// under Wine on Linux CI. pipe_windows.cc puts Node on top of it.
//
// Server: PipeAcceptor claims a name with FILE_FLAG_FIRST_PIPE_INSTANCE, an
// owner-only DACL and PIPE_REJECT_REMOTE_CLIENTS, then hands out connected,
// identity-checked instances one at a time. Client: ConnectVerified opens the
// client end without allowing impersonation and checks who serves it.
#pragma once

#include <windows.h>

#include <string>
#include <vector>

#include "win_error_text.h"

namespace stash {

// The owner-only security descriptor, from SDDL:
//   O:<sid>          owner = the current user (an elevated token's default
//                    owner would be BUILTIN\Administrators)
//   D:P              protected DACL: no inherited entries
//   (A;;GA;;;<sid>)  the only entry: GENERIC_ALL for the current user
// so SYSTEM, Administrators, Everyone and ANONYMOUS LOGON get nothing. The
// default mandatory label (medium, no-write-up) still keeps low-integrity
// processes of the same user out; AppContainers are not named, so not admitted.
class PipeSecurity {
 public:
  PipeSecurity() = default;
  PipeSecurity(const PipeSecurity&) = delete;
  PipeSecurity& operator=(const PipeSecurity&) = delete;
  ~PipeSecurity();

  // Reads our SID (OpenProcessToken + GetTokenInformation(TokenUser)) and
  // builds the descriptor (ConvertSidToStringSidW +
  // ConvertStringSecurityDescriptorToSecurityDescriptorW). Win32 error or 0.
  DWORD Init();
  SECURITY_ATTRIBUTES* attributes() { return &attributes_; }
  PSID user();

 private:
  std::vector<BYTE> user_;
  PSECURITY_DESCRIPTOR descriptor_ = nullptr;
  SECURITY_ATTRIBUTES attributes_{};
};

// Why the process `pid` at the other end of a pipe is refused; empty when it
// runs as `user`. The pid is recorded by the kernel when the pipe is opened
// (GetNamedPipeClientProcessId / GetNamedPipeServerProcessId), not claimed by
// the peer. A second gate behind the DACL, which admits only our SID anyway.
std::string PeerProblem(DWORD pid, PSID user);

// What PipeAcceptor::Next returns.
struct PipeAccept {
  enum Kind { kConnection, kRefused, kStopped, kError } kind = kStopped;
  HANDLE pipe = INVALID_HANDLE_VALUE;  // kConnection: the caller owns it now
  DWORD pid = 0;                       // kConnection, kRefused: the client's pid
  DWORD error = 0;                     // kError: the Win32 error
  std::string message;                 // kRefused: why; kError: what failed
};

class PipeAcceptor {
 public:
  PipeAcceptor() = default;
  PipeAcceptor(const PipeAcceptor&) = delete;
  PipeAcceptor& operator=(const PipeAcceptor&) = delete;
  ~PipeAcceptor();

  // Creates the first instance. ERROR_ACCESS_DENIED (or ERROR_PIPE_BUSY) means
  // the name exists already: FIRST_PIPE_INSTANCE never joins someone else's pipe.
  DWORD Open(const std::wstring& name);

  // Blocks until a client of our user is connected (the next instance is
  // created before it is returned, so the name never has zero instances), a
  // client is refused (disconnected, the instance reused), Stop() is called,
  // or an error ends accepting. Call from one thread at a time.
  PipeAccept Next();

  // Makes a blocked or later Next() return kStopped. Any thread.
  void Stop();

 private:
  DWORD WaitForClient();

  std::wstring name_;
  PipeSecurity security_;
  HANDLE instance_ = INVALID_HANDLE_VALUE;
  HANDLE stop_ = nullptr;
  HANDLE connected_ = nullptr;
};

// What ConnectVerified returns.
struct PipeConnect {
  HANDLE pipe = INVALID_HANDLE_VALUE;  // on success: the caller owns it
  DWORD pid = 0;                       // the serving process
  std::string code;                    // empty on success; else ENOENT, EACCES, EPERM, ETIMEDOUT or WIN32_<n>
  std::string message;
};

// Opens the client end of `name` (UTF-8 for messages, `wide` for the call)
// with SECURITY_IDENTIFICATION, waiting at most timeout_ms for a busy pipe,
// and succeeds only if the serving process runs as our user.
PipeConnect ConnectVerified(const std::string& name, const std::wstring& wide, DWORD timeout_ms);

}  // namespace stash
