// How a Windows failure is named, in every Windows file: code "WIN32_<n>" (the
// GetLastError value) and the text "<call> failed with Windows error <n>". Free
// of N-API, so that pipe_core_windows.cc also links into a plain Windows program
// (native/windows/selftest/); win_error.h throws with them.
#pragma once

#include <windows.h>

#include <string>

namespace stash {

inline std::string Win32Code(DWORD err) { return "WIN32_" + std::to_string(static_cast<unsigned long>(err)); }

inline std::string Win32Text(const char* call, DWORD err) {
  return std::string(call) + " failed with Windows error " + std::to_string(static_cast<unsigned long>(err));
}

}  // namespace stash
