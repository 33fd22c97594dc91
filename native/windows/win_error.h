// Windows failures as Errors with code "WIN32_<n>" (the GetLastError value).
#pragma once

#include <windows.h>
#include <napi.h>

#include <string>

#include "../common/errors.h"

namespace stash {

[[noreturn]] inline void ThrowWin32(Napi::Env env, const char* call, DWORD err) {
  std::string code = "WIN32_" + std::to_string(static_cast<unsigned long>(err));
  ThrowCode(env, code.c_str(), std::string(call) + " failed with Windows error " +
                                   std::to_string(static_cast<unsigned long>(err)));
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
