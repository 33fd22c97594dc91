# One target only: node-gyp-build loads the first .node file it finds, so the package
# ships exactly one addon. The sources come from native/sources.json, the one list that
# CMakeLists.txt (release builds, cmake-js) reads too; each OS condition adds "common" and
# that OS's group, so no source is ever listed twice. On Linux the two groups are compiled
# as one translation unit that #includes them all (native/sources.cjs --unity writes it
# into build/): a third of the CPU time, and every `npm ci` builds the addon. This file is
# the install-time fallback that node-gyp-build runs where no prebuild fits.
{
  "targets": [
    {
      "target_name": "stash_native",
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "conditions": [
        ["OS=='linux'", {
          "sources": ["<!@(node native/sources.cjs --unity common linux)"],
          "libraries": ["-ldl", "-lpthread"]
        }],
        ["OS=='mac'", {
          "sources": ["<!@(node native/sources.cjs common)", "<!@(node native/sources.cjs mac)"],
          "libraries": ["-framework IOKit", "-framework CoreFoundation"],
          "xcode_settings": {
            "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
            "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
            "MACOSX_DEPLOYMENT_TARGET": "10.15"
          }
        }],
        ["OS=='win'", {
          "sources": ["<!@(node native/sources.cjs common)", "<!@(node native/sources.cjs win)"],
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
