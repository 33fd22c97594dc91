// Session lock on Windows; the same JS shape as native/linux/lock_linux.cc.
//
//   new LockWatcher({source: 'wts'}, callback)
//     A thread of its own with a message-only window registered through
//     WTSRegisterSessionNotification(NOTIFY_FOR_THIS_SESSION): WM_WTSSESSION_CHANGE
//     with WTS_SESSION_LOCK reports {type:'lock', locked:true, signal:'WTS_SESSION_LOCK'},
//     WTS_SESSION_UNLOCK {locked:false}. `ready` carries the session id and the
//     state WTSQuerySessionInformationW(WTSSessionInfoEx) reports.
//
// Message-only windows receive session notifications (Chromium's
// SessionChangeObserver registers its message-only SingletonHwnd the same way).
// A window message names no sender: any process on the same desktop (the same
// user, who may ask the agent for its keys anyway; UIPI keeps lower integrity
// out) could post one, so the check is the session id in lParam. wtsapi32.dll is
// resolved at run time, like powrprof.dll in power_windows.cc, so the build
// links nothing new. Events: native/common/lock_event.h.
#include <windows.h>
#include <wtsapi32.h>
#include <napi.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "../common/lock_event.h"
#include "../common/lock_watcher.h"
#include "../common/platform.h"
#include "win_error.h"

namespace stash {
namespace {

// From Microsoft's documentation of WTSQuerySessionInformationW and WTSINFOEXW
// (wtsapi32.h, Windows SDK): mingw-w64 10 lacks WTSSessionInfoEx and the structs.
constexpr int kWtsSessionInfoEx = 25;  // WTS_INFO_CLASS WTSSessionInfoEx
constexpr LONG kWtsSessionStateLock = 0;    // WTS_SESSIONSTATE_LOCK
constexpr LONG kWtsSessionStateUnlock = 1;  // WTS_SESSIONSTATE_UNLOCK
struct WtsInfoExLevel1W {                   // WTSINFOEX_LEVEL1_W
  ULONG SessionId;
  WTS_CONNECTSTATE_CLASS SessionState;
  LONG SessionFlags;  // Windows 7 reversed LOCK and UNLOCK here; Node 20 needs Windows 10
  WCHAR WinStationName[32 + 1];
  WCHAR UserName[20 + 1];
  WCHAR DomainName[17 + 1];
  LARGE_INTEGER LogonTime, ConnectTime, DisconnectTime, LastInputTime, CurrentTime;
  DWORD IncomingBytes, OutgoingBytes, IncomingFrames, OutgoingFrames, IncomingCompressedBytes, OutgoingCompressedBytes;
};
struct WtsInfoExW {  // WTSINFOEXW
  DWORD Level;
  union {
    WtsInfoExLevel1W WTSInfoExLevel1;
  } Data;
};

struct Wtsapi {
  decltype(&WTSRegisterSessionNotification) reg = nullptr;
  decltype(&WTSUnRegisterSessionNotification) unreg = nullptr;
  decltype(&WTSQuerySessionInformationW) query = nullptr;
  decltype(&WTSFreeMemory) free = nullptr;
};

const Wtsapi& LoadWtsapi() {
  static Wtsapi api = []() {
    Wtsapi w;
    HMODULE dll = LoadLibraryExW(L"wtsapi32.dll", nullptr, LOAD_LIBRARY_SEARCH_SYSTEM32);
    if (dll) {
      auto get = [dll](const char* name) { return reinterpret_cast<void*>(GetProcAddress(dll, name)); };
      w.reg = reinterpret_cast<decltype(w.reg)>(get("WTSRegisterSessionNotification"));
      w.unreg = reinterpret_cast<decltype(w.unreg)>(get("WTSUnRegisterSessionNotification"));
      w.query = reinterpret_cast<decltype(w.query)>(get("WTSQuerySessionInformationW"));
      w.free = reinterpret_cast<decltype(w.free)>(get("WTSFreeMemory"));
    }
    return w;
  }();
  return api;
}

// 1 locked, 0 unlocked, -1 unknown.
int SessionLocked(const Wtsapi& api, DWORD session) {
  if (!api.query || !api.free) return -1;
  LPWSTR buffer = nullptr;
  DWORD bytes = 0;
  if (!api.query(WTS_CURRENT_SERVER_HANDLE, session, static_cast<WTS_INFO_CLASS>(kWtsSessionInfoEx), &buffer, &bytes)) {
    return -1;
  }
  int locked = -1;
  if (bytes >= sizeof(WtsInfoExW)) {
    const auto* info = reinterpret_cast<const WtsInfoExW*>(buffer);
    LONG flags = info->Level == 1 ? info->Data.WTSInfoExLevel1.SessionFlags : -1;
    locked = flags == kWtsSessionStateLock ? 1 : flags == kWtsSessionStateUnlock ? 0 : -1;
  }
  api.free(buffer);
  return locked;
}

constexpr const wchar_t* kWindowClass = L"stash.LockWatcher";

// The JS class, stop(), pump() and the source check are native/common/lock_watcher.h's.
class LockWatcher : public LockWatcherBase<LockWatcher> {
 public:
  explicit LockWatcher(const Napi::CallbackInfo& info) : LockWatcherBase(info, {"wts"}, "Windows") {
    Napi::Env env = info.Env();
    const Wtsapi& api = LoadWtsapi();
    if (!api.reg || !api.unreg) ThrowCode(env, "ENOTSUP", "WTSRegisterSessionNotification is missing from wtsapi32.dll");
    if (!ProcessIdToSessionId(GetCurrentProcessId(), &session_)) ThrowWin32(env, "ProcessIdToSessionId", GetLastError());
    setup_done_ = CreateEventW(nullptr, TRUE, FALSE, nullptr);
    if (!setup_done_) ThrowWin32(env, "CreateEvent", GetLastError());
    thread_ = std::thread([this]() { Run(); });
  }

  ~LockWatcher() override {
    Shutdown(false);
    if (setup_done_) CloseHandle(setup_done_);
  }

  // Called once by EventWatcher::Shutdown: close the window (its thread then
  // leaves the message loop) and join the thread.
  void Halt() {
    WaitForSingleObject(setup_done_, INFINITE);
    stopping_ = true;
    if (hwnd_) PostMessageW(hwnd_, WM_CLOSE, 0, 0);
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Fail(const char* call, DWORD err) {
    EmitError(Win32Code(err), Win32Text(call, err));
    SetEvent(setup_done_);
  }

  static HMODULE ThisModule() {
    HMODULE module = nullptr;
    GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                       reinterpret_cast<LPCWSTR>(&LockWatcher::WindowProc), &module);
    return module;
  }

  void Run() {
    HMODULE module = ThisModule();
    WNDCLASSEXW wc{};
    wc.cbSize = sizeof(wc);
    wc.lpfnWndProc = &LockWatcher::WindowProc;
    wc.hInstance = module;
    wc.lpszClassName = kWindowClass;
    // One class per process; a second watcher finds it registered already.
    if (!RegisterClassExW(&wc) && GetLastError() != ERROR_CLASS_ALREADY_EXISTS) return Fail("RegisterClassExW", GetLastError());
    HWND hwnd = CreateWindowExW(0, kWindowClass, L"stash session lock", 0, 0, 0, 0, 0, HWND_MESSAGE, nullptr, module, this);
    if (!hwnd) return Fail("CreateWindowExW", GetLastError());
    // Fails with RPC_S_INVALID_BINDING while the Terminal Services service is still
    // starting (early in a logon); the TypeScript side retries.
    if (!LoadWtsapi().reg(hwnd, NOTIFY_FOR_THIS_SESSION)) {
      DWORD err = GetLastError();
      DestroyWindow(hwnd);
      return Fail("WTSRegisterSessionNotification", err);
    }
    hwnd_ = hwnd;
    auto ready = Event(LockEvent::kReady);
    ready->session = std::to_string(static_cast<unsigned long>(session_));
    ready->locked = SessionLocked(LoadWtsapi(), session_);
    Emit(std::move(ready));
    SetEvent(setup_done_);
    MSG msg;
    while (GetMessageW(&msg, nullptr, 0, 0) > 0) DispatchMessageW(&msg);
    // Any process on the desktop can post WM_CLOSE to a window: say that nothing is watched any more.
    if (!stopping_) {
      EmitError("ECANCELED", "the session notification window was closed from outside");
    }
  }

  void OnSessionChange(WPARAM change, LPARAM session) {
    if (change != WTS_SESSION_LOCK && change != WTS_SESSION_UNLOCK) return;
    const char* signal = change == WTS_SESSION_LOCK ? "WTS_SESSION_LOCK" : "WTS_SESSION_UNLOCK";
    if (static_cast<DWORD>(session) != session_) {
      auto ev = Event(LockEvent::kIgnored);
      ev->signal = signal;
      ev->sender = "session " + std::to_string(static_cast<unsigned long>(session));
      return Emit(std::move(ev));
    }
    auto ev = Event(LockEvent::kLock);
    ev->locked = change == WTS_SESSION_LOCK ? 1 : 0;
    ev->signal = signal;
    Emit(std::move(ev));
  }

  static LRESULT CALLBACK WindowProc(HWND hwnd, UINT message, WPARAM wparam, LPARAM lparam) {
    if (message == WM_NCCREATE) {
      auto* create = reinterpret_cast<CREATESTRUCTW*>(lparam);
      SetWindowLongPtrW(hwnd, GWLP_USERDATA, reinterpret_cast<LONG_PTR>(create->lpCreateParams));
    }
    auto* self = reinterpret_cast<LockWatcher*>(GetWindowLongPtrW(hwnd, GWLP_USERDATA));
    switch (message) {
      case WM_WTSSESSION_CHANGE:
        if (self) self->OnSessionChange(wparam, lparam);
        return 0;
      case WM_CLOSE:
        LoadWtsapi().unreg(hwnd);
        DestroyWindow(hwnd);
        return 0;
      case WM_DESTROY:
        PostQuitMessage(0);
        return 0;
      default:
        return DefWindowProcW(hwnd, message, wparam, lparam);
    }
  }

  DWORD session_ = 0;
  HANDLE setup_done_ = nullptr;  // set once the thread listens, or has failed
  HWND hwnd_ = nullptr;          // written by the thread before setup_done_
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace

void InitSessionLock(Napi::Env env, Napi::Object exports) { exports.Set("LockWatcher", LockWatcher::Define(env)); }

}  // namespace stash
