#!/usr/bin/env bash
# Compile-checks the macOS half of the addon (native/sources.json: "common" + "mac") for
# x86_64 and arm64 with the header-only SDK folder of this machine: its check-macos-native.sh
# (clang-19 against headers from Apple's open-source releases; no Xcode, no link; see its README).
#   scripts/check-macos-native.sh [--werror]
# The folder is $STASH_MACOS_SDK, else ../shared/macos-sdk beside the project.
# Exit status: that script's (0 every source compiled, 1 a compile error, 2 a setup problem);
# 2 when the folder is missing.
#
# A copy of the folder whose symbolic links were flattened into small files naming their
# targets (found here: sysroot/usr/include/pthread.h held the text "pthread/pthread.h", and
# CoreFoundation.framework/Headers the text "Versions/Current/Headers") fails every compile
# with "unknown type name 'pthread'". Such a folder is checked through a temporary copy with
# those links put back; the folder itself is never changed.
set -uo pipefail
cd "$(dirname "$0")/.."
sdk=${STASH_MACOS_SDK:-../shared/macos-sdk}
if [ ! -x "$sdk/check-macos-native.sh" ] || [ ! -d "$sdk/sysroot" ]; then
  echo "check-macos-native: no macOS header SDK at $sdk (set STASH_MACOS_SDK to the folder holding check-macos-native.sh and sysroot/)" >&2
  exit 2
fi
# A flattened link: a one-line file without a newline whose text is a relative path that exists beside it.
flattened() {
  find "$1/sysroot" -type f -size -300c | while read -r f; do
    [ "$(wc -l <"$f")" = 0 ] || continue
    target=$(cat "$f")
    case "$target" in "" | /* | *[!A-Za-z0-9_./-]*) continue ;; esac
    [ -e "$(dirname "$f")/$target" ] && echo "$f"
  done
}
if [ -n "$(flattened "$sdk" | head -1)" ]; then
  copy=$(mktemp -d "${TMPDIR:-/tmp}/stash-macos-sdk.XXXXXX")
  trap 'rm -rf "$copy"' EXIT
  cp -R "$sdk/." "$copy/" && chmod -R u+w "$copy" || exit 2
  # A link may point through another (Headers -> Versions/Current/Headers): repeat until none is left.
  for _ in 1 2 3 4; do
    links=$(flattened "$copy")
    [ -n "$links" ] || break
    while read -r f; do
      target=$(cat "$f")
      rm "$f" && ln -s "$target" "$f"
    done <<<"$links"
  done
  echo "check-macos-native: $sdk has flattened symbolic links; checking through a copy with them restored" >&2
  sdk=$copy
fi
"$sdk/check-macos-native.sh" "$@" "$PWD"
