// The head every platform's session lock watcher shares (native/<os>/lock_<os>.cc):
// the JS class LockWatcher(options, callback) with stop() and pump(), the
// options' `source` checked against the sources this OS has, and the events
// of native/common/lock_event.h stamped with that source. Each OS file keeps
// only how it listens (its constructor, Halt(), see event_watcher.h) and,
// on macOS, a Pump() of its own:
//
//   class LockWatcher : public LockWatcherBase<LockWatcher> {
//     LockWatcher(const Napi::CallbackInfo& info) : LockWatcherBase(info, {"wts"}, "Windows") {...}
//     ~LockWatcher() override { Shutdown(false); }
//     void Halt() {...}
//   };
#pragma once

#include <napi.h>

#include <initializer_list>
#include <memory>
#include <string>

#include "errors.h"
#include "event_watcher.h"
#include "lock_event.h"

namespace stash {

template <typename Derived>
class LockWatcherBase : public EventWatcher<Derived, LockEvent, LockEventObject> {
  using Base = EventWatcher<Derived, LockEvent, LockEventObject>;

 public:
  static Napi::Function Define(Napi::Env env) {
    return Base::DefineClass(env, "LockWatcher",
                             {Base::StopMethod(), Base::InstanceMethod("pump", &LockWatcherBase::PumpCall)});
  }

 protected:
  // info[0] is {source, ...}, info[1] the callback; a source not in `sources`
  // is refused with EINVAL ("no lock source X on <os>").
  LockWatcherBase(const Napi::CallbackInfo& info, std::initializer_list<const char*> sources, const char* os)
      : Base(info, 1, "stash.LockWatcher") {
    source_ = info[0].As<Napi::Object>().Get("source").As<Napi::String>().Utf8Value();
    for (const char* s : sources) {
      if (source_ == s) return;
    }
    ThrowCode(info.Env(), "EINVAL", "no lock source " + source_ + " on " + os);
  }

  const std::string& Source() const { return source_; }

  // A new event of this watcher's source.
  std::unique_ptr<LockEvent> Event(LockEvent::Kind kind) const { return LockEvent::Make(kind, source_); }

  // Reports that the watcher stopped listening: {type:'error', code, message}.
  void EmitError(const std::string& code, const std::string& message) {
    auto ev = Event(LockEvent::kError);
    ev->code = code;
    ev->message = message;
    this->Emit(std::move(ev));
  }

  // Whether pump() handled anything: only macOS has a run loop to service
  // (it hides this); the Linux and Windows watchers listen on threads of their own.
  bool Pump() { return false; }

 private:
  Napi::Value PumpCall(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), static_cast<Derived*>(this)->Pump());
  }

  std::string source_;
};

}  // namespace stash
