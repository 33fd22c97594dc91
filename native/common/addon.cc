// Addon entry: the platform folder chosen by binding.gyp supplies every Init*.
#include <napi.h>

#include "platform.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
#if defined(_WIN32)
  exports.Set("platform", Napi::String::New(env, "win32"));
#elif defined(__APPLE__)
  exports.Set("platform", Napi::String::New(env, "darwin"));
#else
  exports.Set("platform", Napi::String::New(env, "linux"));
#endif
  exports.Set("abi", Napi::Number::New(env, 1));
  stash::InitPeer(env, exports);
  stash::InitHarden(env, exports);
  stash::InitSystemLog(env, exports);
  stash::InitPower(env, exports);
  stash::InitProcess(env, exports);
  stash::InitSessionLock(env, exports);
#if defined(_WIN32)
  stash::InitConsole(env, exports);
#else
  stash::InitSyncSocket(env, exports);
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(stash_native, Init)
