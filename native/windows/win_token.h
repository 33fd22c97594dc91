// The user SID of a process, read from its access token. Shared by process
// hardening (our own SID for the process DACL) and the named pipe (our SID for
// the pipe DACL, and each peer's SID for the identity check). Returns a Win32
// error code instead of throwing, because the pipe calls it off the JS thread.
#pragma once

#include <windows.h>

#include <vector>

namespace stash {

// OpenProcessToken(TOKEN_QUERY) + GetTokenInformation(TokenUser). On success
// `out` holds a TOKEN_USER whose User.Sid points into `out` itself.
inline DWORD TokenUserOf(HANDLE process, std::vector<BYTE>* out) {
  HANDLE token = nullptr;
  if (!OpenProcessToken(process, TOKEN_QUERY, &token)) return GetLastError();
  DWORD size = 0;
  GetTokenInformation(token, TokenUser, nullptr, 0, &size);  // fails by design: asks for the size
  DWORD err = ERROR_SUCCESS;
  if (size == 0) {
    err = GetLastError();
  } else {
    out->assign(size, 0);
    if (!GetTokenInformation(token, TokenUser, out->data(), size, &size)) err = GetLastError();
  }
  CloseHandle(token);
  return err;
}

// The SID inside a buffer filled by TokenUserOf.
inline PSID SidOf(std::vector<BYTE>& token_user) {
  return reinterpret_cast<TOKEN_USER*>(token_user.data())->User.Sid;
}

// The user SID of process `pid`: OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)
// then TokenUserOf. Fails (ERROR_ACCESS_DENIED) for most processes of other
// users, which the callers treat as "not us" anyway.
inline DWORD ProcessUser(DWORD pid, std::vector<BYTE>* out) {
  HANDLE process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
  if (!process) return GetLastError();
  DWORD err = TokenUserOf(process, out);
  CloseHandle(process);
  return err;
}

}  // namespace stash
