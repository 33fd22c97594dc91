// The agent's named pipe, Win32 only (see pipe_core_windows.h).
//
// Server:
//   CreateNamedPipeW(PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED |
//                    FILE_FLAG_FIRST_PIPE_INSTANCE (first instance only),
//                    PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT |
//                    PIPE_REJECT_REMOTE_CLIENTS, owner-only SECURITY_ATTRIBUTES)
//   FIRST_PIPE_INSTANCE fails with ERROR_ACCESS_DENIED when the name already
//   exists: a second agent, or a process that claimed the name before us (a
//   squatter), is refused instead of shared. Next() waits in an overlapped
//   ConnectNamedPipe (cancellable by an event), then GetNamedPipeClientProcessId
//   -> OpenProcess -> OpenProcessToken -> GetTokenInformation(TokenUser) ->
//   EqualSid with our own SID. A refused client is disconnected
//   (DisconnectNamedPipe) and the instance reused. For an accepted client the
//   next instance is created before the connected one is returned, so the name
//   never has zero instances (with zero, anyone could create it again with
//   their own DACL).
//
// Client:
//   CreateFileW(SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION): a server can
//   identify us but never impersonate us, whoever it is; ERROR_PIPE_BUSY ->
//   WaitNamedPipeW (bounded); then GetNamedPipeServerProcessId and the same SID
//   comparison, so a pipe that another user created under our name gets no
//   byte from us.
#include "pipe_core_windows.h"

#include <sddl.h>

#include "win_token.h"

namespace stash {
namespace {

// Kernel buffer quota per direction. Advisory: a larger SBX2 frame (up to
// 128 KiB) is still written whole, in more than one round.
constexpr DWORD kBufferSize = 64 * 1024;
constexpr DWORD kStopped = 0xFFFFFFFF;

HANDLE CreateInstance(const std::wstring& name, PipeSecurity* security, bool first) {
  DWORD open_mode = PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | (first ? FILE_FLAG_FIRST_PIPE_INSTANCE : 0);
  DWORD pipe_mode = PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS;
  return CreateNamedPipeW(name.c_str(), open_mode, pipe_mode, PIPE_UNLIMITED_INSTANCES, kBufferSize, kBufferSize, 0,
                          security->attributes());
}

}  // namespace

// ---- security ----------------------------------------------------------------

PipeSecurity::~PipeSecurity() {
  if (descriptor_) LocalFree(descriptor_);
}

DWORD PipeSecurity::Init() {
  DWORD err = TokenUserOf(GetCurrentProcess(), &user_);
  if (err != ERROR_SUCCESS) return err;
  LPWSTR sid_text = nullptr;
  if (!ConvertSidToStringSidW(SidOf(user_), &sid_text)) return GetLastError();
  std::wstring sid(sid_text);
  LocalFree(sid_text);
  std::wstring sddl = L"O:" + sid + L"D:P(A;;GA;;;" + sid + L")";
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1, &descriptor_, nullptr)) {
    return GetLastError();
  }
  attributes_.nLength = sizeof(attributes_);
  attributes_.lpSecurityDescriptor = descriptor_;
  attributes_.bInheritHandle = FALSE;
  return ERROR_SUCCESS;
}

PSID PipeSecurity::user() { return SidOf(user_); }

std::string PeerProblem(DWORD pid, PSID user) {
  std::vector<BYTE> peer;
  DWORD err = ProcessUser(pid, &peer);
  if (err != ERROR_SUCCESS) {
    return "cannot read the user of pid " + std::to_string(pid) + " (" + Win32Text("OpenProcess/OpenProcessToken", err) + ")";
  }
  if (!EqualSid(SidOf(peer), user)) return "pid " + std::to_string(pid) + " runs as another user";
  return std::string();
}

// ---- server ------------------------------------------------------------------

PipeAcceptor::~PipeAcceptor() {
  if (instance_ != INVALID_HANDLE_VALUE) CloseHandle(instance_);  // the name goes with the last instance
  if (stop_) CloseHandle(stop_);
  if (connected_) CloseHandle(connected_);
}

DWORD PipeAcceptor::Open(const std::wstring& name) {
  name_ = name;
  DWORD err = security_.Init();
  if (err != ERROR_SUCCESS) return err;
  stop_ = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  connected_ = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (!stop_ || !connected_) return GetLastError();
  instance_ = CreateInstance(name_, &security_, true);
  return instance_ == INVALID_HANDLE_VALUE ? GetLastError() : ERROR_SUCCESS;
}

void PipeAcceptor::Stop() {
  if (stop_) SetEvent(stop_);
}

// One overlapped ConnectNamedPipe on instance_, cancelled by stop_.
// Returns ERROR_SUCCESS when a client is connected, kStopped, or the error.
DWORD PipeAcceptor::WaitForClient() {
  if (WaitForSingleObject(stop_, 0) == WAIT_OBJECT_0) return kStopped;
  OVERLAPPED ov{};
  ov.hEvent = connected_;
  ResetEvent(connected_);
  if (ConnectNamedPipe(instance_, &ov)) return ERROR_SUCCESS;
  DWORD err = GetLastError();
  if (err == ERROR_PIPE_CONNECTED) return ERROR_SUCCESS;  // the client came before ConnectNamedPipe
  if (err != ERROR_IO_PENDING) return err;
  HANDLE waits[2] = {stop_, connected_};
  DWORD which = WaitForMultipleObjects(2, waits, FALSE, INFINITE);
  DWORD transferred = 0;
  if (which != WAIT_OBJECT_0 + 1) {
    // Stop (or a failed wait): cancel, and wait for the cancellation, since
    // the kernel writes into `ov` until the I/O has completed.
    CancelIoEx(instance_, &ov);
    GetOverlappedResult(instance_, &ov, &transferred, TRUE);
    return kStopped;
  }
  return GetOverlappedResult(instance_, &ov, &transferred, FALSE) ? ERROR_SUCCESS : GetLastError();
}

PipeAccept PipeAcceptor::Next() {
  PipeAccept out;
  if (instance_ == INVALID_HANDLE_VALUE) {
    out.kind = PipeAccept::kError;
    out.error = ERROR_INVALID_HANDLE;
    out.message = "the pipe has no instance (Open failed or accepting ended)";
    return out;
  }
  for (;;) {
    DWORD err = WaitForClient();
    if (err == kStopped) {
      out.kind = PipeAccept::kStopped;
      return out;
    }
    if (err == ERROR_NO_DATA) {  // the client connected and already closed its end
      DisconnectNamedPipe(instance_);
      continue;
    }
    if (err != ERROR_SUCCESS) {
      out.kind = PipeAccept::kError;
      out.error = err;
      out.message = Win32Text("ConnectNamedPipe", err);
      return out;
    }
    ULONG pid = 0;
    std::string problem = GetNamedPipeClientProcessId(instance_, &pid)
                              ? PeerProblem(pid, security_.user())
                              : Win32Text("GetNamedPipeClientProcessId", GetLastError());
    out.pid = pid;
    if (!problem.empty()) {
      DisconnectNamedPipe(instance_);
      out.kind = PipeAccept::kRefused;
      out.message = problem;
      return out;
    }
    HANDLE next = CreateInstance(name_, &security_, false);
    if (next == INVALID_HANDLE_VALUE) {
      // Keep nothing half-done: this client is dropped, and accepting ends.
      err = GetLastError();
      CloseHandle(instance_);
      instance_ = INVALID_HANDLE_VALUE;
      out.kind = PipeAccept::kError;
      out.error = err;
      out.message = Win32Text("CreateNamedPipe (next instance)", err);
      return out;
    }
    out.kind = PipeAccept::kConnection;
    out.pipe = instance_;
    instance_ = next;
    return out;
  }
}

// ---- client ------------------------------------------------------------------

PipeConnect ConnectVerified(const std::string& name, const std::wstring& wide, DWORD timeout_ms) {
  PipeConnect out;
  auto fail = [&out](std::string code, std::string message) {
    if (out.pipe != INVALID_HANDLE_VALUE) CloseHandle(out.pipe);
    out.pipe = INVALID_HANDLE_VALUE;
    out.code = std::move(code);
    out.message = std::move(message);
    return out;
  };
  ULONGLONG deadline = GetTickCount64() + timeout_ms;
  for (;;) {
    out.pipe = CreateFileW(wide.c_str(), GENERIC_READ | GENERIC_WRITE, 0, nullptr, OPEN_EXISTING,
                           FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION, nullptr);
    if (out.pipe != INVALID_HANDLE_VALUE) break;
    DWORD err = GetLastError();
    ULONGLONG now = GetTickCount64();
    if (err == ERROR_PIPE_BUSY && now < deadline) {
      // Every instance is in use: wait, bounded, for the server's next one.
      WaitNamedPipeW(wide.c_str(), static_cast<DWORD>(deadline - now));
      continue;
    }
    // ENOENT: no such pipe (no agent) - the autostart path. EACCES: a pipe by
    // that name exists but its DACL shuts us out, so it is not our agent's.
    const char* code = err == ERROR_FILE_NOT_FOUND    ? "ENOENT"
                       : err == ERROR_PIPE_BUSY       ? "ETIMEDOUT"
                       : err == ERROR_ACCESS_DENIED   ? "EACCES"
                                                      : nullptr;
    return fail(code ? code : Win32Code(err), name + ": " + Win32Text("CreateFile", err));
  }
  ULONG pid = 0;
  if (!GetNamedPipeServerProcessId(out.pipe, &pid)) {
    DWORD err = GetLastError();
    return fail(Win32Code(err), Win32Text("GetNamedPipeServerProcessId", err));
  }
  std::vector<BYTE> self;
  DWORD err = TokenUserOf(GetCurrentProcess(), &self);
  if (err != ERROR_SUCCESS) return fail(Win32Code(err), Win32Text("GetTokenInformation(TokenUser)", err));
  std::string problem = PeerProblem(pid, SidOf(self));
  if (!problem.empty()) return fail("EPERM", name + " is not served by a process of your user: " + problem);
  out.pid = pid;
  return out;
}

}  // namespace stash
