// Suspend protection on Windows; the same JS shape as native/linux/power_linux.cc.
//
//   powerProbe()                        -> Promise<{available, backend:'windows', library, owner:null, reason}>
//   powerInhibit(what, who, why, 'block') -> Promise<id>: PowerCreateRequest + PowerSetRequest(SystemRequired)
//   powerRelease(id)                    -> PowerClearRequest + CloseHandle
//   new PowerWatcher(callback)          -> PowerRegisterSuspendResumeNotification(DEVICE_NOTIFY_CALLBACK);
//        on PBT_APMSUSPEND it reports {type:'sleep', start:true, id} and holds the
//        callback (at most kSuspendBudgetMs) until JS calls allowSleep(id);
//        PBT_APMRESUMEAUTOMATIC reports {type:'sleep', start:false}.
//
// Windows has no "delay" inhibitor: the suspend callback itself is the delay.
// Windows gives suspend callbacks about 2 seconds in total (less on Modern
// Standby), so the wait is bounded below that; the wipe in JS takes microseconds.
#include <windows.h>
#include <napi.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "../common/event_watcher.h"
#include "../common/errors.h"
#include "../common/power_event.h"
#include "../common/platform.h"
#include "win_error.h"

namespace stash {
namespace {

constexpr DWORD kSuspendBudgetMs = 1800;
// From winuser.h / powerbase.h (Windows 8+). mingw-w64 lacks the powerbase
// declarations, and resolving the functions at run time lets the addon load on
// systems without them (the watcher then reports why it is unavailable).
constexpr DWORD kDeviceNotifyCallback = 2;  // DEVICE_NOTIFY_CALLBACK
typedef ULONG(CALLBACK* NotifyCallback)(PVOID context, ULONG type, PVOID setting);
struct NotifySubscribeParameters {  // DEVICE_NOTIFY_SUBSCRIBE_PARAMETERS
  NotifyCallback Callback;
  PVOID Context;
};
typedef DWORD(WINAPI* RegisterFn)(DWORD flags, HANDLE recipient, PVOID* registration);
typedef DWORD(WINAPI* UnregisterFn)(PVOID registration);

struct PowrProf {
  RegisterFn reg = nullptr;
  UnregisterFn unreg = nullptr;
};

const PowrProf& LoadPowrProf() {
  static PowrProf api = []() {
    PowrProf p;
    HMODULE dll = LoadLibraryExW(L"powrprof.dll", nullptr, LOAD_LIBRARY_SEARCH_SYSTEM32);
    if (dll) {
      p.reg = reinterpret_cast<RegisterFn>(
          reinterpret_cast<void*>(GetProcAddress(dll, "PowerRegisterSuspendResumeNotification")));
      p.unreg = reinterpret_cast<UnregisterFn>(
          reinterpret_cast<void*>(GetProcAddress(dll, "PowerUnregisterSuspendResumeNotification")));
    }
    return p;
  }();
  return api;
}

// Power request handles by small integer id: JS numbers cannot carry a HANDLE.
std::mutex g_requests_mutex;
std::map<uint32_t, HANDLE> g_requests;
uint32_t g_next_request = 1;

Napi::Value PowerProbe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const PowrProf& api = LoadPowrProf();
  Napi::Object out = Napi::Object::New(env);
  bool ok = api.reg != nullptr && api.unreg != nullptr;
  out.Set("available", Napi::Boolean::New(env, ok));
  out.Set("backend", "windows");
  out.Set("library", "powrprof.dll");
  out.Set("owner", env.Null());
  out.Set("reason", ok ? env.Null()
                       : Napi::Value(Napi::String::New(
                             env, "PowerRegisterSuspendResumeNotification is missing (needs Windows 8 or later)")));
  return Resolved(env, out);
}

Napi::Value PowerInhibit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string mode = info[3].As<Napi::String>().Utf8Value();
  if (mode != "block") ThrowCode(env, "ENOTSUP", "Windows has no delay inhibitor; the suspend callback is the delay");
  std::wstring why = Widen(info[2].As<Napi::String>().Utf8Value());
  REASON_CONTEXT reason{};
  reason.Version = POWER_REQUEST_CONTEXT_VERSION;
  reason.Flags = POWER_REQUEST_CONTEXT_SIMPLE_STRING;
  reason.Reason.SimpleReasonString = &why[0];
  HANDLE request = PowerCreateRequest(&reason);
  if (request == INVALID_HANDLE_VALUE || request == nullptr) ThrowWin32(env, "PowerCreateRequest", GetLastError());
  if (!PowerSetRequest(request, PowerRequestSystemRequired)) {
    DWORD err = GetLastError();
    CloseHandle(request);
    ThrowWin32(env, "PowerSetRequest", err);
  }
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    id = g_next_request++;
    g_requests[id] = request;
  }
  return Resolved(env, Napi::Number::New(env, id));
}

Napi::Value PowerRelease(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint32_t id = info[0].As<Napi::Number>().Uint32Value();
  HANDLE request = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    auto it = g_requests.find(id);
    if (it == g_requests.end()) ThrowCode(env, "EBADF", "no such power request");
    request = it->second;
    g_requests.erase(it);
  }
  PowerClearRequest(request, PowerRequestSystemRequired);
  CloseHandle(request);
  return env.Undefined();
}

// ---- the suspend watcher ----------------------------------------------------

// The callback, the cleanup hook and stop() are native/common/event_watcher.h's.
class PowerWatcher : public EventWatcher<PowerWatcher, PowerEvent, PowerEventObject> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "PowerWatcher", {StopMethod(), InstanceMethod<&PowerWatcher::AllowSleep>("allowSleep")});
  }

  explicit PowerWatcher(const Napi::CallbackInfo& info) : EventWatcher(info, 0, "stash.PowerWatcher") {
    Napi::Env env = info.Env();
    const PowrProf& api = LoadPowrProf();
    if (!api.reg || !api.unreg) ThrowCode(env, "ENOTSUP", "PowerRegisterSuspendResumeNotification is missing");
    done_ = CreateEventW(nullptr, TRUE, FALSE, nullptr);
    if (!done_) ThrowWin32(env, "CreateEvent", GetLastError());
    params_.Callback = &PowerWatcher::OnPower;
    params_.Context = this;
    DWORD rc = api.reg(kDeviceNotifyCallback, reinterpret_cast<HANDLE>(&params_), &registration_);
    if (rc != ERROR_SUCCESS) {
      Emit(PowerEvent::Error(Win32Code(rc), Win32Text("PowerRegisterSuspendResumeNotification", rc)));
    } else {
      Emit(PowerEvent::Make(PowerEvent::kReady));
    }
  }

  ~PowerWatcher() override {
    Shutdown(false);
    // Closed only here: a callback that raced with stop() may still touch it.
    if (done_) CloseHandle(done_);
  }

  // Called once by EventWatcher::Shutdown.
  void Halt() {
    stopping_ = true;
    SetEvent(done_);  // never leave a suspend callback waiting on a watcher that is gone
    if (registration_) LoadPowrProf().unreg(registration_);
    registration_ = nullptr;
  }

 private:

  Napi::Value AllowSleep(const Napi::CallbackInfo& info) {
    uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    uint32_t expected = id;
    bool matched = id != 0 && pending_.compare_exchange_strong(expected, 0);
    if (matched) SetEvent(done_);
    return Napi::Boolean::New(info.Env(), matched);
  }

  // Runs on a system thread.
  static ULONG CALLBACK OnPower(PVOID context, ULONG type, PVOID) {
    auto* self = static_cast<PowerWatcher*>(context);
    if (self->stopping_) return ERROR_SUCCESS;
    if (type == PBT_APMSUSPEND) {
      uint32_t id = ++self->sequence_;
      if (id == 0) id = ++self->sequence_;
      ResetEvent(self->done_);
      self->pending_ = id;
      self->Emit(PowerEvent::Sleep(true, id));
      // Bounded: Windows suspends regardless once its budget is spent.
      WaitForSingleObject(self->done_, kSuspendBudgetMs);
      self->pending_ = 0;
    } else if (type == PBT_APMRESUMEAUTOMATIC) {
      // PBT_APMRESUMESUSPEND follows only when a user is present; AUTOMATIC always comes.
      self->Emit(PowerEvent::Sleep(false, 0));
    }
    return ERROR_SUCCESS;
  }

  NotifySubscribeParameters params_{};
  PVOID registration_ = nullptr;
  HANDLE done_ = nullptr;
  std::atomic<uint32_t> pending_{0};
  std::atomic<uint32_t> sequence_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace

void InitPower(Napi::Env env, Napi::Object exports) {
  exports.Set("powerProbe", Napi::Function::New(env, PowerProbe, "powerProbe"));
  exports.Set("powerInhibit", Napi::Function::New(env, PowerInhibit, "powerInhibit"));
  exports.Set("powerRelease", Napi::Function::New(env, PowerRelease, "powerRelease"));
  exports.Set("PowerWatcher", PowerWatcher::Define(env));
}

}  // namespace stash
