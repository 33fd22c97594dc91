// Windows failures as Errors with code "WIN32_<n>" (the GetLastError value),
// named as win_error_text.h names them.
#pragma once

#include <windows.h>
#include <napi.h>

#include <string>

#include "../common/errors.h"
#include "win_error_text.h"

namespace stash {

[[noreturn]] inline void ThrowWin32(Napi::Env env, const char* call, DWORD err) {
  ThrowCode(env, Win32Code(err).c_str(), Win32Text(call, err));
}

// UTF-8 to UTF-16 for the W APIs.
inline std::wstring Widen(const std::string& s) {
  if (s.empty()) return std::wstring();
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), &out[0], n);
  return out;
}

}  // namespace stash
