// Hands one event from a watcher thread to its JavaScript callback: the
// CallJs of the TypedThreadSafeFunction of every native watcher (event_watcher.h).
#pragma once

#include <napi.h>

#include <memory>

namespace stash {

// `ToObject` builds the object the callback receives. No C++ exception may
// unwind into libuv (that aborts node). A failure here means the environment
// is shutting down, or the callback threw: that one goes back to node as an
// uncaught exception.
template <typename Event, Napi::Object (*ToObject)(Napi::Env, const Event&)>
void DeliverEvent(Napi::Env env, Napi::Function callback, std::nullptr_t*, Event* raw) {
  std::unique_ptr<Event> ev(raw);
  if (env == nullptr || callback == nullptr) return;  // the TSFN is being torn down
  try {
    callback.Call({ToObject(env, *ev)});
  } catch (const Napi::Error& e) {
    try {
      e.ThrowAsJavaScriptException();
    } catch (...) {
    }
  } catch (...) {
  }
}

}  // namespace stash
