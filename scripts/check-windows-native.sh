#!/usr/bin/env bash
# Syntax-checks the Windows half of the addon (native/windows + native/common)
# with mingw-w64, the closest this Linux CI gets to a Windows build.
# The posix-thread variant is needed: napi.h uses std::mutex.
#   scripts/check-windows-native.sh            every Windows source and header
#   scripts/check-windows-native.sh FILE...    only these (the test uses it to prove a broken file fails)
#   scripts/check-windows-native.sh --selftest OUT.exe
#       links native/windows/selftest/pipe_selftest.cc with the pipe core into a
#       plain Windows program (no Node), which the tests run under Wine
#   scripts/check-windows-native.sh --addon OUT.node NODE_EXE
#       builds the whole Windows addon as a DLL linked against the N-API and
#       libuv exports of a Windows node.exe (an import library made from its
#       export table with dlltool), so that the agent can run under Wine with
#       that node.exe (test/agent/windows-pipe.test.ts)
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
napi_defines=(-DNAPI_VERSION=8 -DNAPI_CPP_EXCEPTIONS -DNODE_ADDON_API_DISABLE_DEPRECATED)
if [ "${1:-}" = "--addon" ]; then
  out=$2 node_exe=$3
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  { echo "LIBRARY node.exe"; echo "EXPORTS"
    x86_64-w64-mingw32-objdump -p "$node_exe" | sed -n '/\[Ordinal\/Name Pointer\] Table/,$p' |
      grep -oE '\b(napi|node_api|uv)_[A-Za-z0-9_]+$' | sort -u; } > "$work/node.def"
  x86_64-w64-mingw32-dlltool -d "$work/node.def" -l "$work/libnode.a"
  "$cxx" -shared -std=c++17 -O0 -Wall -Wextra -Wno-unused-parameter -Werror "${napi_defines[@]}" "${defines[@]}" \
    -I/usr/include/node -I"$addon_api" native/common/addon.cc native/common/errors.cc native/windows/*.cc \
    -static -L"$work" -lnode -ladvapi32 -lpowrprof -luser32 -o "$out"
  exit 0
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  # Headers on their own too, so each one includes what it uses.
  files=(native/common/addon.cc native/common/errors.cc native/windows/*.cc native/windows/*.h)
fi
status=0
for src in "${files[@]}"; do
  # A header is checked as the only include of an empty file.
  input=("$src")
  case "$src" in *.h) input=(-include "$src" /dev/null) ;; esac
  if "$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Werror -x c++ \
      "${napi_defines[@]}" "${defines[@]}" \
      -I/usr/include/node -I"$addon_api" "${input[@]}"; then
    echo "ok   $src"
  else
    echo "FAIL $src"; status=1
  fi
done
exit $status
