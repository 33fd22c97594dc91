// What every platform's session lock watcher reports to JavaScript
// (native/<os>/lock_<os>.cc), as one struct and one conversion, so that
// src/native/session-lock.ts reads the same objects on Linux, macOS and Windows:
//
//   {type:'ready',   source, owner, session, locked}      listening; locked: true/false/null (unknown)
//   {type:'lock',    source, locked, signal, sender, at}  the session locked (true) or unlocked (false)
//   {type:'ignored', source, signal, sender}              a signal from a sender that may not speak for it
//   {type:'owner',   source, name, owner}                 a watched bus name changed hands (owner null: gone)
//   {type:'error',   source, code, message}               the watcher stopped listening
#pragma once

#include <napi.h>

#include <memory>
#include <string>

namespace stash {

struct LockEvent {
  enum Kind { kReady, kLock, kIgnored, kOwner, kError } kind;
  std::string source;
  std::string signal;   // lock, ignored
  std::string sender;   // lock, ignored; empty when the OS names none
  std::string name;     // owner
  std::string owner;    // ready, owner; empty: nobody
  std::string session;  // ready: the session watched (a logind object path, a Windows session id)
  std::string code;     // error
  std::string message;  // error
  int locked = -1;      // ready (-1: unknown), lock (0 or 1)
  // lock: when the signal was read, in microseconds on the clock process.hrtime
  // reads (Linux: CLOCK_MONOTONIC); 0 where the platform does not say.
  double at_us = 0;

  static std::unique_ptr<LockEvent> Make(Kind kind, const std::string& source) {
    auto ev = std::make_unique<LockEvent>();
    ev->kind = kind;
    ev->source = source;
    return ev;
  }
};

inline Napi::Object LockEventObject(Napi::Env env, const LockEvent& ev) {
  Napi::Object o = Napi::Object::New(env);
  auto text = [&](const std::string& s) { return s.empty() ? env.Null() : Napi::Value(Napi::String::New(env, s)); };
  auto tri = [&](int v) { return v < 0 ? env.Null() : Napi::Value(Napi::Boolean::New(env, v != 0)); };
  o.Set("source", ev.source);
  switch (ev.kind) {
    case LockEvent::kReady:
      o.Set("type", "ready");
      o.Set("owner", text(ev.owner));
      o.Set("session", text(ev.session));
      o.Set("locked", tri(ev.locked));
      break;
    case LockEvent::kLock:
      o.Set("type", "lock");
      o.Set("locked", Napi::Boolean::New(env, ev.locked > 0));
      o.Set("signal", ev.signal);
      o.Set("sender", text(ev.sender));
      o.Set("at", Napi::Number::New(env, ev.at_us));
      break;
    case LockEvent::kIgnored:
      o.Set("type", "ignored");
      o.Set("signal", ev.signal);
      o.Set("sender", text(ev.sender));
      break;
    case LockEvent::kOwner:
      o.Set("type", "owner");
      o.Set("name", ev.name);
      o.Set("owner", text(ev.owner));
      break;
    case LockEvent::kError:
      o.Set("type", "error");
      o.Set("code", ev.code);
      o.Set("message", ev.message);
      break;
  }
  return o;
}

}  // namespace stash
