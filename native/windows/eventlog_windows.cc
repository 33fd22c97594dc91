// The agent's system log on Windows: the Application Event Log, source "stash Agent".
// Without a registered message file the viewer shows a generic prefix before
// the text; the text itself is intact.
#include <windows.h>
#include <napi.h>

#include <string>

#include "../common/platform.h"
#include "win_error.h"

namespace stash {
namespace {

HANDLE g_source = nullptr;

Napi::Value OpenSystemLog(const Napi::CallbackInfo& info) {
  std::wstring name = Widen(info[0].As<Napi::String>().Utf8Value());
  if (g_source) DeregisterEventSource(g_source);
  g_source = RegisterEventSourceW(nullptr, name.c_str());
  if (!g_source) ThrowWin32(info.Env(), "RegisterEventSource", GetLastError());
  return info.Env().Undefined();
}

Napi::Value SystemLog(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int level = info[0].As<Napi::Number>().Int32Value();
  if (level < 0 || level > 7) ThrowCode(env, "EINVAL", "log level must be 0..7");
  if (!g_source) ThrowCode(env, "ENOTCONN", "openSystemLog was not called");
  std::wstring text = Widen(info[1].As<Napi::String>().Utf8Value());
  // syslog levels: 0..3 errors, 4 warning, 5..7 information.
  WORD type = level <= 3 ? EVENTLOG_ERROR_TYPE : level == 4 ? EVENTLOG_WARNING_TYPE : EVENTLOG_INFORMATION_TYPE;
  LPCWSTR strings[1] = {text.c_str()};
  if (!ReportEventW(g_source, type, 0, 0, nullptr, 1, 0, strings, nullptr)) {
    ThrowWin32(env, "ReportEvent", GetLastError());
  }
  return env.Undefined();
}

Napi::Value CloseSystemLog(const Napi::CallbackInfo& info) {
  if (g_source) DeregisterEventSource(g_source);
  g_source = nullptr;
  return info.Env().Undefined();
}

}  // namespace

void InitSystemLog(Napi::Env env, Napi::Object exports) {
  exports.Set("openSystemLog", Napi::Function::New(env, OpenSystemLog, "openSystemLog"));
  exports.Set("systemLog", Napi::Function::New(env, SystemLog, "systemLog"));
  exports.Set("closeSystemLog", Napi::Function::New(env, CloseSystemLog, "closeSystemLog"));
}

}  // namespace stash
