// Suspend protection on macOS; the same JS shape as native/linux/power_linux.cc.
//
//   powerProbe()                          -> Promise<{available:true, backend:'iokit', library:'IOKit', owner:null, reason:null}>
//   powerInhibit(what, who, why, 'block') -> Promise<id>: IOPMAssertionCreateWithName(PreventUserIdleSystemSleep)
//   powerRelease(id)                      -> IOPMAssertionRelease
//   new PowerWatcher(callback)            -> IORegisterForSystemPower on a CFRunLoop thread:
//        kIOMessageCanSystemSleep   is allowed at once (idle sleep: no veto from us);
//        kIOMessageSystemWillSleep  reports {type:'sleep', start:true, id} and is allowed
//                                   only when JS calls allowSleep(id), after the wipe;
//        kIOMessageSystemHasPoweredOn reports {type:'sleep', start:false}.
//
// macOS waits up to 30 s for IOAllowPowerChange, then sleeps anyway. An assertion
// prevents idle sleep only; a lid close or an explicit "Sleep" still sleeps, and
// the WillSleep wipe covers those. Compile-checked on the Linux CI, never run there.
#include <napi.h>
#include <CoreFoundation/CoreFoundation.h>
#include <IOKit/IOMessage.h>
#include <IOKit/pwr_mgt/IOPMLib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "../common/event_watcher.h"
#include "../common/errors.h"
#include "../common/power_event.h"
#include "../common/platform.h"

namespace stash {
namespace {

Napi::Value PowerProbe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  out.Set("available", Napi::Boolean::New(env, true));
  out.Set("backend", "iokit");
  out.Set("library", "IOKit");
  out.Set("owner", env.Null());
  out.Set("reason", env.Null());
  return Resolved(env, out);
}

Napi::Value PowerInhibit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string mode = info[3].As<Napi::String>().Utf8Value();
  if (mode != "block") ThrowCode(env, "ENOTSUP", "macOS has no delay inhibitor; the WillSleep notification is the delay");
  std::string why = info[2].As<Napi::String>().Utf8Value();
  CFStringRef name = CFStringCreateWithCString(kCFAllocatorDefault, why.c_str(), kCFStringEncodingUTF8);
  if (name == nullptr) ThrowCode(env, "EINVAL", "assertion name is not valid UTF-8");
  IOPMAssertionID id = kIOPMNullAssertionID;
  IOReturn rc = IOPMAssertionCreateWithName(kIOPMAssertionTypePreventUserIdleSystemSleep, kIOPMAssertionLevelOn,
                                            name, &id);
  CFRelease(name);
  if (rc != kIOReturnSuccess) {
    ThrowCode(env, "EIO", "IOPMAssertionCreateWithName failed with IOReturn " + std::to_string(rc));
  }
  return Resolved(env, Napi::Number::New(env, id));
}

Napi::Value PowerRelease(const Napi::CallbackInfo& info) {
  IOPMAssertionID id = info[0].As<Napi::Number>().Uint32Value();
  IOReturn rc = IOPMAssertionRelease(id);
  if (rc != kIOReturnSuccess) {
    ThrowCode(info.Env(), "EBADF", "IOPMAssertionRelease failed with IOReturn " + std::to_string(rc));
  }
  return info.Env().Undefined();
}

// ---- the sleep watcher ------------------------------------------------------

// The callback, the cleanup hook and stop() are native/common/event_watcher.h's.
class PowerWatcher : public EventWatcher<PowerWatcher, PowerEvent, PowerEventObject> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "PowerWatcher", {StopMethod(), InstanceMethod<&PowerWatcher::AllowSleep>("allowSleep")});
  }

  explicit PowerWatcher(const Napi::CallbackInfo& info) : EventWatcher(info, 0, "stash.PowerWatcher") {
    thread_ = std::thread([this]() { Run(); });
  }

  ~PowerWatcher() override { Shutdown(false); }

  // Called once by EventWatcher::Shutdown: answer a pending sleep, stop the run loop, join.
  void Halt() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Never leave the system waiting 30 s on a watcher that is gone.
      if (has_pending_ && root_port_ != MACH_PORT_NULL) IOAllowPowerChange(root_port_, static_cast<long>(pending_));
      has_pending_ = false;
      stopping_ = true;
      if (run_loop_) CFRunLoopStop(run_loop_);
    }
    if (thread_.joinable()) thread_.join();
  }

 private:

  // IOAllowPowerChange is a Mach message to the root power domain, safe from any thread.
  Napi::Value AllowSleep(const Napi::CallbackInfo& info) {
    uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    return Napi::Boolean::New(info.Env(), Allow(id));
  }

  bool Allow(uint32_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!has_pending_ || pending_ != id || root_port_ == MACH_PORT_NULL) return false;
    has_pending_ = false;
    IOAllowPowerChange(root_port_, static_cast<long>(id));
    return true;
  }

  // Runs on the watcher thread, from its run loop.
  static void OnPower(void* refcon, io_service_t, natural_t type, void* argument) {
    auto* self = static_cast<PowerWatcher*>(refcon);
    long id = reinterpret_cast<long>(argument);
    switch (type) {
      case kIOMessageCanSystemSleep:
        IOAllowPowerChange(self->root_port_, id);
        break;
      case kIOMessageSystemWillSleep: {
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->pending_ = static_cast<uint32_t>(id);
        self->has_pending_ = true;
        self->Emit(PowerEvent::Sleep(true, static_cast<uint32_t>(id)));
        break;
      }
      case kIOMessageSystemHasPoweredOn:
        self->Emit(PowerEvent::Sleep(false, 0));
        break;
      default:
        break;
    }
  }

  void Run() {
    IONotificationPortRef port = nullptr;
    io_object_t notifier = 0;
    io_connect_t root = IORegisterForSystemPower(this, &port, &PowerWatcher::OnPower, &notifier);
    if (root == MACH_PORT_NULL) {
      Emit(PowerEvent::Error("EIO", "IORegisterForSystemPower failed"));
      return;
    }
    CFRunLoopSourceRef source = IONotificationPortGetRunLoopSource(port);
    CFRunLoopAddSource(CFRunLoopGetCurrent(), source, kCFRunLoopDefaultMode);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      root_port_ = root;
      run_loop_ = CFRunLoopGetCurrent();
    }
    Emit(PowerEvent::Make(PowerEvent::kReady));
    // Short slices: a CFRunLoopStop that lands before the loop runs is not lost.
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) break;
      }
      CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.5, false);
    }
    CFRunLoopRemoveSource(CFRunLoopGetCurrent(), source, kCFRunLoopDefaultMode);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      run_loop_ = nullptr;
      root_port_ = MACH_PORT_NULL;
    }
    IODeregisterForSystemPower(&notifier);
    IOServiceClose(root);
    IONotificationPortDestroy(port);
  }

  std::thread thread_;
  std::mutex mutex_;
  CFRunLoopRef run_loop_ = nullptr;
  io_connect_t root_port_ = MACH_PORT_NULL;
  uint32_t pending_ = 0;
  bool has_pending_ = false;
  bool stopping_ = false;
};

}  // namespace

void InitPower(Napi::Env env, Napi::Object exports) {
  exports.Set("powerProbe", Napi::Function::New(env, PowerProbe, "powerProbe"));
  exports.Set("powerInhibit", Napi::Function::New(env, PowerInhibit, "powerInhibit"));
  exports.Set("powerRelease", Napi::Function::New(env, PowerRelease, "powerRelease"));
  exports.Set("PowerWatcher", PowerWatcher::Define(env));
}

}  // namespace stash
