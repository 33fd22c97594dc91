// The part every native watcher shares, whatever it listens to: JavaScript
// constructs it with a callback and ends it with stop(); events found on
// another thread (a bus thread, a run loop, a window procedure) reach the
// callback through one thread-safe function; an environment cleanup hook stops
// it if the process exits without stop(). Each OS file keeps only how it
// listens, in two members of the derived class:
//
//   void Halt();   // stop listening: wake and join the thread, unregister;
//                  // called once, from stop(), the destructor or the cleanup hook
//   (its constructor starts listening once this base is constructed)
//
//   class PowerWatcher : public EventWatcher<PowerWatcher, PowerEvent, PowerEventObject> {
//     PowerWatcher(const Napi::CallbackInfo& info) : EventWatcher(info, 0, "stash.PowerWatcher") {...}
//     ~PowerWatcher() override { Shutdown(false); }
//     void Halt() {...}
//   };
//
// The session lock watchers go through lock_watcher.h, which adds their shared head.
#pragma once

#include <napi.h>

#include <memory>
#include <string>

#include "deliver_event.h"
#include "errors.h"

namespace stash {

template <typename Derived, typename Event, Napi::Object (*ToObject)(Napi::Env, const Event&)>
class EventWatcher : public Napi::ObjectWrap<Derived> {
 public:
  using EventFn = Napi::TypedThreadSafeFunction<std::nullptr_t, Event, DeliverEvent<Event, ToObject>>;

  // The callback is info[callback_index]; `name` names the resource in diagnostics.
  EventWatcher(const Napi::CallbackInfo& info, size_t callback_index, const char* name)
      : Napi::ObjectWrap<Derived>(info) {
    Napi::Env env = info.Env();
    if (!info[callback_index].IsFunction()) ThrowCode(env, "EINVAL", std::string(name) + " needs a callback");
    tsfn_ = EventFn::New(env, info[callback_index].As<Napi::Function>(), name, 0, 1);
    // A watcher alone must not keep the process alive: an agent that is done
    // exits even if nobody called stop().
    tsfn_.Unref(env);
    hook_ = env.AddCleanupHook(&EventWatcher::OnEnvCleanup, this);
    active_ = true;
  }

  // Reached on its own only when the derived constructor threw (it never
  // started listening); otherwise the derived destructor has shut down already.
  ~EventWatcher() override { Release(false); }

  // The stop() method, for the derived class's DefineClass list.
  static Napi::ClassPropertyDescriptor<Derived> StopMethod() {
    return Napi::ObjectWrap<Derived>::InstanceMethod("stop", &EventWatcher::StopCall);
  }

 protected:
  // Hands one event to the callback; any thread. Dropped once stopped (the
  // queue is unbounded, so a live watcher never drops one).
  void Emit(std::unique_ptr<Event> ev) {
    if (tsfn_.NonBlockingCall(ev.get()) == napi_ok) ev.release();
  }

  // Stops listening (Derived::Halt) and lets go of the callback. Idempotent.
  void Shutdown(bool from_cleanup_hook) {
    if (!active_) return;
    active_ = false;
    static_cast<Derived*>(this)->Halt();
    Release(from_cleanup_hook);
  }

 private:
  static void OnEnvCleanup(EventWatcher* self) { self->Shutdown(true); }

  Napi::Value StopCall(const Napi::CallbackInfo& info) {
    Shutdown(false);
    return info.Env().Undefined();
  }

  void Release(bool from_cleanup_hook) {
    if (released_) return;
    released_ = true;
    tsfn_.Release();
    // The hook is gone already when it is what called us.
    if (!from_cleanup_hook && !hook_.IsEmpty()) hook_.Remove(this->Env());
  }

  EventFn tsfn_;
  Napi::Env::CleanupHook<void (*)(EventWatcher*), EventWatcher> hook_;
  bool active_ = false;
  bool released_ = false;
};

}  // namespace stash
