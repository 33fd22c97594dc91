#!/usr/bin/env bash
# Syntax-checks the Windows half of the addon (native/windows + native/common)
# with mingw-w64, the closest this Linux CI gets to a Windows build.
# The posix-thread variant is needed: napi.h uses std::mutex.
#   scripts/check-windows-native.sh            every Windows source and header
#   scripts/check-windows-native.sh FILE...    only these (the test uses it to prove a broken file fails)
#   scripts/check-windows-native.sh --selftest OUT.exe
#       links native/windows/selftest/pipe_selftest.cc with the pipe core into a
#       plain Windows program (no Node), which the tests run under Wine
# The whole Windows addon is built by cmake-js with the mingw-w64 toolchain file
# (node scripts/release/build.js win32-x64), as the release does.
# Warnings are errors: the Windows code is never run here, so the compiler is
# the only reviewer it gets.
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=x86_64-w64-mingw32-g++-posix
if ! command -v "$cxx" >/dev/null; then
  echo "check-windows-native: $cxx not found (apt-get install g++-mingw-w64-x86-64)" >&2
  exit 1
fi
defines=(-DUNICODE -D_UNICODE -DWIN32_LEAN_AND_MEAN -DNOMINMAX -D_WIN32_WINNT=0x0A00)
if [ "${1:-}" = "--selftest" ]; then
  exec "$cxx" -std=c++17 -O1 -Wall -Wextra -Werror "${defines[@]}" \
    native/windows/selftest/pipe_selftest.cc native/windows/pipe_core_windows.cc \
    -static -ladvapi32 -o "$2"
fi
addon_api=$(node -p "require('node-addon-api').include_dir")
# N-API's own headers from node-api-headers (what cmake-js builds with), not a Node install's.
napi_inc=$(node -p "require('node-api-headers').include_dir")
napi_defines=(-DNAPI_VERSION=8 -DNAPI_CPP_EXCEPTIONS -DNODE_ADDON_API_DISABLE_DEPRECATED)
if [ $# -gt 0 ]; then
  files=("$@")
else
  # native/sources.json's common sources (the ones every build compiles), the Windows
  # sources, and the headers on their own too, so each one includes what it uses
  # (native/common's *_posix files are the Unix builds' only).
  mapfile -t common < <(node native/sources.cjs common)
  common_headers=()
  for h in native/common/*.h; do
    case "$h" in *_posix.h) ;; *) common_headers+=("$h") ;; esac
  done
  files=("${common[@]}" "${common_headers[@]}" native/windows/*.cc native/windows/*.h)
fi
status=0
for src in "${files[@]}"; do
  # A header is checked as the only include of an empty file.
  input=("$src")
  case "$src" in *.h) input=(-include "$src" /dev/null) ;; esac
  if "$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Werror -x c++ \
      "${napi_defines[@]}" "${defines[@]}" \
      -I"$napi_inc" -I"$addon_api" "${input[@]}"; then
    echo "ok   $src"
  else
    echo "FAIL $src"; status=1
  fi
done
exit $status
