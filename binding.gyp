# One target only: node-gyp-build and prebuildify load the first .node file they find,
# so the package ships exactly one addon. Each OS condition adds only that OS's sources,
# so no source is ever listed twice.
{
  "targets": [
    {
      "target_name": "stash_native",
      "sources": ["native/common/addon.cc", "native/common/errors.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "conditions": [
        ["OS=='linux'", {
          "sources": [
            "native/common/syslog_posix.cc",
            "native/linux/peer_linux.cc",
            "native/linux/harden_linux.cc",
            "native/linux/sdbus_linux.cc",
            "native/linux/power_linux.cc",
            "native/linux/proc_linux.cc"
          ],
          "libraries": ["-ldl", "-lpthread"]
        }],
        ["OS=='mac'", {
          "sources": [
            "native/common/syslog_posix.cc",
            "native/macos/peer_macos.cc",
            "native/macos/harden_macos.cc",
            "native/macos/power_macos.cc"
          ],
          "libraries": ["-framework IOKit", "-framework CoreFoundation"],
          "xcode_settings": {
            "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
            "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
            "MACOSX_DEPLOYMENT_TARGET": "10.15"
          }
        }],
        ["OS=='win'", {
          "sources": [
            "native/windows/peer_windows.cc",
            "native/windows/pipe_windows.cc",
            "native/windows/pipe_core_windows.cc",
            "native/windows/harden_windows.cc",
            "native/windows/eventlog_windows.cc",
            "native/windows/power_windows.cc"
          ],
          "libraries": ["advapi32.lib", "powrprof.lib", "user32.lib"],
          "defines": ["UNICODE", "_UNICODE", "WIN32_LEAN_AND_MEAN", "NOMINMAX"],
          "msvs_settings": {
            "VCCLCompilerTool": {"ExceptionHandling": 1, "AdditionalOptions": ["/std:c++17"]}
          }
        }]
      ]
    }
  ]
}
