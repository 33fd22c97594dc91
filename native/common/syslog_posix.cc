// System log on Unix (Linux and macOS alike), through openlog/syslog.
// Shared by both Unix platforms: the POSIX API is the same, so one file serves
// both and binding.gyp adds it once per Unix build.
#include <napi.h>
#include <syslog.h>

#include <string>

#include "errors.h"
#include "platform.h"

namespace stash {
namespace {

// openlog keeps the pointer, so the identity must outlive every syslog call.
std::string g_ident;
bool g_open = false;

Napi::Value OpenSystemLog(const Napi::CallbackInfo& info) {
  g_ident = info[0].As<Napi::String>().Utf8Value();
  openlog(g_ident.c_str(), LOG_PID | LOG_NDELAY, LOG_USER);
  g_open = true;
  return info.Env().Undefined();
}

Napi::Value SystemLog(const Napi::CallbackInfo& info) {
  int level = info[0].As<Napi::Number>().Int32Value();
  std::string message = info[1].As<Napi::String>().Utf8Value();
  if (level < LOG_EMERG || level > LOG_DEBUG) {
    ThrowCode(info.Env(), "EINVAL", "syslog level must be 0..7");
  }
  // "%s" so that a message can never be read as a format string.
  syslog(level, "%s", message.c_str());
  return info.Env().Undefined();
}

Napi::Value CloseSystemLog(const Napi::CallbackInfo& info) {
  if (g_open) closelog();
  g_open = false;
  return info.Env().Undefined();
}

}  // namespace

void InitSystemLog(Napi::Env env, Napi::Object exports) {
  exports.Set("openSystemLog", Napi::Function::New(env, OpenSystemLog, "openSystemLog"));
  exports.Set("systemLog", Napi::Function::New(env, SystemLog, "systemLog"));
  exports.Set("closeSystemLog", Napi::Function::New(env, CloseSystemLog, "closeSystemLog"));
}

}  // namespace stash
