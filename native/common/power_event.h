// What every platform's sleep watcher reports to JavaScript
// (native/<os>/power_<os>.cc), as one struct and one conversion, so that
// src/native/power.ts reads the same objects on Linux, macOS and Windows:
//
//   {type:'ready',   owner}                  listening; owner: logind's unique name (Linux), else null
//   {type:'sleep',   start, sender, id?, at?} about to sleep (start true) or resumed (false);
//                                            id (macOS, Windows): what allowSleep(id) takes;
//                                            at (Linux): when the signal was read, microseconds on
//                                            the clock process.hrtime reads (CLOCK_MONOTONIC)
//   {type:'owner',   owner}                  Linux: logind's name changed hands (null: gone)
//   {type:'ignored', sender}                 Linux: a PrepareForSleep from a sender that may not speak for logind
//   {type:'error',   code, message}          the watcher stopped listening
#pragma once

#include <napi.h>

#include <cstdint>
#include <memory>
#include <string>

namespace stash {

struct PowerEvent {
  enum Kind { kReady, kSleep, kOwner, kIgnored, kError } kind;
  bool start = false;   // sleep
  std::string owner;    // ready, owner; empty: null
  std::string sender;   // sleep, ignored; empty: null (macOS and Windows name none)
  std::string code;     // error
  std::string message;  // error
  int64_t id = -1;      // sleep: the platform's sleep id; -1: the platform has none (no `id`)
  double at_us = -1;    // sleep: when it was read; -1: the platform does not say (no `at`)

  static std::unique_ptr<PowerEvent> Make(Kind kind) {
    auto ev = std::make_unique<PowerEvent>();
    ev->kind = kind;
    return ev;
  }

  // `id`: the platform's sleep id (macOS, Windows; 0 on resume), or -1 where it has none.
  static std::unique_ptr<PowerEvent> Sleep(bool start, int64_t id) {
    auto ev = Make(kSleep);
    ev->start = start;
    ev->id = id;
    return ev;
  }

  static std::unique_ptr<PowerEvent> Error(const std::string& code, const std::string& message) {
    auto ev = Make(kError);
    ev->code = code;
    ev->message = message;
    return ev;
  }
};

inline Napi::Object PowerEventObject(Napi::Env env, const PowerEvent& ev) {
  Napi::Object o = Napi::Object::New(env);
  auto text = [&](const std::string& s) { return s.empty() ? env.Null() : Napi::Value(Napi::String::New(env, s)); };
  switch (ev.kind) {
    case PowerEvent::kReady:
      o.Set("type", "ready");
      o.Set("owner", text(ev.owner));
      break;
    case PowerEvent::kSleep:
      o.Set("type", "sleep");
      o.Set("start", Napi::Boolean::New(env, ev.start));
      o.Set("sender", text(ev.sender));
      if (ev.id >= 0) o.Set("id", Napi::Number::New(env, double(ev.id)));
      if (ev.at_us >= 0) o.Set("at", Napi::Number::New(env, ev.at_us));
      break;
    case PowerEvent::kOwner:
      o.Set("type", "owner");
      o.Set("owner", text(ev.owner));
      break;
    case PowerEvent::kIgnored:
      o.Set("type", "ignored");
      o.Set("sender", text(ev.sender));
      break;
    case PowerEvent::kError:
      o.Set("type", "error");
      o.Set("code", ev.code);
      o.Set("message", ev.message);
      break;
  }
  return o;
}

// A promise already resolved with `value`: the power calls that are
// asynchronous on Linux (a bus round trip) answer at once elsewhere.
inline Napi::Value Resolved(Napi::Env env, Napi::Value value) {
  auto deferred = Napi::Promise::Deferred::New(env);
  deferred.Resolve(value);
  return deferred.Promise();
}

}  // namespace stash
