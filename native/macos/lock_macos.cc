// Session lock on macOS; the same JS shape as native/linux/lock_linux.cc.
//
//   new LockWatcher({source: 'distributed'}, callback); pump()
//     The com.apple.screenIsLocked and com.apple.screenIsUnlocked distributed
//     notifications (loginwindow posts them) through
//     CFNotificationCenterGetDistributedCenter: {type:'lock', locked, signal}.
//     `ready` has locked: null (no public call reads the state).
//
// CoreFoundation delivers distributed notifications on the main thread's run
// loop only ("Notification delivery is registered for the main thread",
// CFNotificationCenterAddObserver), and Node's main thread runs libuv, never a
// CFRunLoop. So there is no thread here: pump(), which the JS side calls from a
// timer on the main thread, runs the main run loop without waiting
// (CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, true)) until nothing is
// pending; the observer's callback runs inside it and hands the event on like
// every watcher. The timer's period bounds the latency (src/agent/lock/index.ts).
//
// Distributed notifications name no sender: any process of the user's login
// session can post one (the same user may ask the agent for its keys anyway).
// Events: native/common/lock_event.h.
#include <napi.h>
#include <CoreFoundation/CoreFoundation.h>
#include <pthread.h>

#include <memory>
#include <string>

#include "../common/lock_event.h"
#include "../common/lock_watcher.h"
#include "../common/platform.h"

#if __has_include(<CoreFoundation/CFNotificationCenter.h>)
#include <CoreFoundation/CFNotificationCenter.h>
#else
// Written from Apple's public documentation of CFNotificationCenter
// (developer.apple.com/documentation/corefoundation/cfnotificationcenter):
// the open CoreFoundation headers the macOS check compiles against (CF-1153.18)
// do not include CFNotificationCenter.h. An SDK that has it uses its own above.
extern "C" {
typedef struct __CFNotificationCenter* CFNotificationCenterRef;
typedef void (*CFNotificationCallback)(CFNotificationCenterRef center, void* observer, CFStringRef name,
                                       const void* object, CFDictionaryRef userInfo);
typedef CFIndex CFNotificationSuspensionBehavior;
enum : CFIndex { CFNotificationSuspensionBehaviorDeliverImmediately = 4 };
CF_EXPORT CFNotificationCenterRef CFNotificationCenterGetDistributedCenter(void);
CF_EXPORT void CFNotificationCenterAddObserver(CFNotificationCenterRef center, const void* observer,
                                               CFNotificationCallback callBack, CFStringRef name, const void* object,
                                               CFNotificationSuspensionBehavior suspensionBehavior);
CF_EXPORT void CFNotificationCenterRemoveEveryObserver(CFNotificationCenterRef center, const void* observer);
}
#endif

namespace stash {
namespace {

// Bounds one pump: a flood of notifications must not hold the JS thread.
constexpr int kMaxSourcesPerPump = 64;

// The JS class, stop(), pump() and the source check are native/common/lock_watcher.h's.
class LockWatcher : public LockWatcherBase<LockWatcher> {
 public:
  explicit LockWatcher(const Napi::CallbackInfo& info) : LockWatcherBase(info, {"distributed"}, "macOS") {
    Napi::Env env = info.Env();
    // pump() can only run the main thread's run loop from the main thread.
    if (pthread_main_np() == 0) ThrowCode(env, "ENOTSUP", "the macOS lock watcher runs on the main thread only");
    CFNotificationCenterRef center = CFNotificationCenterGetDistributedCenter();
    if (center == nullptr) ThrowCode(env, "ENOTSUP", "no distributed notification center");
    // DeliverImmediately: an agent counts as a background process; the default
    // behaviour would hold the notification until it came to the foreground.
    CFNotificationCenterAddObserver(center, this, &LockWatcher::OnNotification, CFSTR("com.apple.screenIsLocked"),
                                    nullptr, CFNotificationSuspensionBehaviorDeliverImmediately);
    CFNotificationCenterAddObserver(center, this, &LockWatcher::OnNotification, CFSTR("com.apple.screenIsUnlocked"),
                                    nullptr, CFNotificationSuspensionBehaviorDeliverImmediately);
    observing_ = true;
    Emit(Event(LockEvent::kReady));
  }

  ~LockWatcher() override { Shutdown(false); }

  // Called once by EventWatcher::Shutdown, on the main thread (stop(), the
  // destructor, the cleanup hook): no callback can run after this.
  void Halt() {
    if (observing_) CFNotificationCenterRemoveEveryObserver(CFNotificationCenterGetDistributedCenter(), this);
    observing_ = false;
  }

  // pump(): runs what is pending on the main run loop, without waiting; true when something was.
  bool Pump() {
    bool handled = false;
    for (int i = 0; observing_ && i < kMaxSourcesPerPump; i++) {
      if (CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, true) != kCFRunLoopRunHandledSource) break;
      handled = true;
    }
    return handled;
  }

 private:

  // Runs on the main thread, inside Pump.
  static void OnNotification(CFNotificationCenterRef, void* observer, CFStringRef name, const void*, CFDictionaryRef) {
    auto* self = static_cast<LockWatcher*>(observer);
    if (!self->observing_ || name == nullptr) return;
    bool locked = CFStringCompare(name, CFSTR("com.apple.screenIsLocked"), 0) == kCFCompareEqualTo;
    if (!locked && CFStringCompare(name, CFSTR("com.apple.screenIsUnlocked"), 0) != kCFCompareEqualTo) return;
    auto ev = self->Event(LockEvent::kLock);
    ev->locked = locked ? 1 : 0;
    ev->signal = locked ? "com.apple.screenIsLocked" : "com.apple.screenIsUnlocked";
    self->Emit(std::move(ev));
  }

  bool observing_ = false;
};

}  // namespace

void InitSessionLock(Napi::Env env, Napi::Object exports) { exports.Set("LockWatcher", LockWatcher::Define(env)); }

}  // namespace stash
