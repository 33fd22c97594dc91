// Session lock on Linux: two sources, each a thread with its own bus connection.
//
//   new LockWatcher({source: 'logind', sessionId}, callback)   system bus
//     The agent's own logind session (Manager.GetSessionByPID(getpid()), else
//     Manager.GetSession(sessionId), the XDG_SESSION_ID the JS side passes):
//     Session.Lock / Session.Unlock signals, and LockedHint through
//     PropertiesChanged (read once with Properties.Get at the start).
//   new LockWatcher({source: 'screensaver'}, callback)         session bus
//     ActiveChanged(b) of org.freedesktop.ScreenSaver (KDE, xfce, ...) and of
//     org.gnome.ScreenSaver (GNOME Shell), from whoever owns that name now.
//
// Events: native/common/lock_event.h. Every signal is believed only from the
// unique name that owns the well-known name right now (tracked through
// NameOwnerChanged), as native/linux/power_linux.cc does for PrepareForSleep:
// dbus-daemon routes a broadcast only to matching rules, but a signal sent
// straight to our unique name reaches sd-bus, whose matches cannot resolve a
// well-known sender on dbus-daemon and let it through (sd-bus bus-match.c).
// Policy (what a lock does, retries) lives in src/agent/lock/.
#include <napi.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "../common/errors.h"
#include "../common/lock_event.h"
#include "../common/lock_watcher.h"
#include "../common/platform.h"
#include "bus_thread_linux.h"
#include "sdbus_linux.h"

namespace stash {
namespace {

constexpr const char* kSessionInterface = "org.freedesktop.login1.Session";
constexpr const char* kPropertiesInterface = "org.freedesktop.DBus.Properties";
// Setup calls block stop() until they return (Properties.Get from a match callback too).
constexpr uint64_t kLockCallTimeoutUsec = 2 * 1000 * 1000;

// The two screensaver names and the object each answers GetActive on.
struct ScreenSaver {
  const char* name;  // bus name and interface
  const char* path;
};
constexpr ScreenSaver kScreenSavers[] = {
    {"org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver"},
    {"org.gnome.ScreenSaver", "/org/gnome/ScreenSaver"},
};
constexpr size_t kScreenSaverCount = sizeof(kScreenSavers) / sizeof(kScreenSavers[0]);

// The JS class, stop(), pump() and the source check are native/common/lock_watcher.h's.
class LockWatcher : public LockWatcherBase<LockWatcher> {
 public:
  explicit LockWatcher(const Napi::CallbackInfo& info) : LockWatcherBase(info, {"logind", "screensaver"}, "Linux") {
    Napi::Env env = info.Env();
    Napi::Value id = info[0].As<Napi::Object>().Get("sessionId");
    if (id.IsString()) session_id_ = id.As<Napi::String>().Utf8Value();
    api_ = LoadSdBusOrThrow(env);
    thread_.Start(env, [this]() { Source() == "logind" ? RunLogind() : RunScreenSaver(); });
  }

  ~LockWatcher() override { Shutdown(false); }

  // Called once by EventWatcher::Shutdown.
  void Halt() { thread_.Stop(); }

 private:
  void Fail(const BusFailure& f) { EmitError(f.code, f.message); }

  void Ignored(const char* signal, const char* sender) {
    auto ev = Event(LockEvent::kIgnored);
    ev->signal = signal;
    ev->sender = sender ? sender : "";
    Emit(std::move(ev));
  }

  void Locked(bool locked, const std::string& signal, const char* sender, uint64_t at_us) {
    auto ev = Event(LockEvent::kLock);
    ev->locked = locked ? 1 : 0;
    ev->signal = signal;
    ev->sender = sender ? sender : "";
    ev->at_us = double(at_us);
    Emit(std::move(ev));
  }

  void Owner(const char* name, const std::string& owner) {
    auto ev = Event(LockEvent::kOwner);
    ev->name = name;
    ev->owner = owner;
    Emit(std::move(ev));
  }

  bool AddMatch(const std::string& rule, sd_bus_message_handler_t handler, BusFailure* failure) {
    int r = api_->add_match(bus_, nullptr, rule.c_str(), handler, this);
    if (r < 0) DescribeBusFailure(("AddMatch " + rule).c_str(), r, nullptr, failure);
    return r >= 0;
  }

  // NameOwnerChanged for `name`: added before GetNameOwner, so that no change in between goes unseen.
  bool WatchOwner(const char* name, BusFailure* failure) {
    return AddMatch(std::string("type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='") + name + "'",
                    &LockWatcher::OnNameOwnerChanged, failure);
  }

  // One method call on the watcher's bus; `append` adds the arguments. False with `failure` filled on error.
  template <typename Append>
  bool Call(const char* dest, const char* path, const char* iface, const char* member, MessageRef* reply,
            BusFailure* failure, Append append) {
    MessageRef call(api_);
    int r = api_->message_new_method_call(bus_, call.out(), dest, path, iface, member);
    if (r >= 0) r = append(call.get());
    sd_bus_error error{nullptr, nullptr, 0};
    if (r >= 0) r = api_->call(bus_, call.get(), kLockCallTimeoutUsec, &error, reply->out());
    if (r < 0) DescribeBusFailure(member, r, &error, failure);
    api_->error_free(&error);
    return r >= 0;
  }

  bool Call(const char* dest, const char* path, const char* iface, const char* member, MessageRef* reply,
            BusFailure* failure) {
    return Call(dest, path, iface, member, reply, failure, [](sd_bus_message*) { return 0; });
  }

  // ---- logind -----------------------------------------------------------------

  // The agent's session object: by pid (the session scope it runs in), else by XDG_SESSION_ID.
  bool FindSession(BusFailure* failure) {
    uint32_t pid = uint32_t(getpid());
    MessageRef by_pid(api_);
    BusFailure pid_failure;
    const char* path = nullptr;
    if (Call(kLogindName, "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "GetSessionByPID", &by_pid,
             &pid_failure, [&](sd_bus_message* m) { return api_->message_append(m, "u", pid); }) &&
        api_->message_read(by_pid.get(), "o", &path) >= 0 && path != nullptr) {
      session_path_ = path;
      return true;
    }
    if (session_id_.empty()) {
      // One line: a stand-in's error message may carry a whole Python traceback.
      std::string why = pid_failure.message.substr(0, pid_failure.message.find('\n'));
      *failure = BusFailure{"ENOENT", "no logind session for pid " + std::to_string(pid) + " (" + why +
                                          ") and XDG_SESSION_ID is not set", ""};
      return false;
    }
    MessageRef by_id(api_);
    if (!Call(kLogindName, "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "GetSession", &by_id, failure,
              [&](sd_bus_message* m) { return api_->message_append(m, "s", session_id_.c_str()); })) {
      failure->message = "no logind session for pid " + std::to_string(pid) + ", nor for XDG_SESSION_ID=" +
                         session_id_ + ": " + failure->message;
      return false;
    }
    if (api_->message_read(by_id.get(), "o", &path) < 0 || path == nullptr) {
      DescribeBusFailure("GetSession reply", -EBADMSG, nullptr, failure);
      return false;
    }
    session_path_ = path;
    return true;
  }

  // Session.LockedHint (logind 230+): 1, 0, or -1 when it cannot be read.
  int ReadLockedHint() {
    MessageRef reply(api_);
    BusFailure ignored;
    int hint = 0;
    auto args = [&](sd_bus_message* m) { return api_->message_append(m, "ss", kSessionInterface, "LockedHint"); };
    if (!Call(kLogindName, session_path_.c_str(), kPropertiesInterface, "Get", &reply, &ignored, args) ||
        api_->message_read(reply.get(), "v", "b", &hint) < 0) {
      return -1;
    }
    return hint != 0;
  }

  void RunLogind() {
    BusFailure failure;
    bus_ = OpenSystemBus(api_, kLockCallTimeoutUsec, &failure);
    if (bus_ == nullptr) return Fail(failure);
    BusRef bus(api_, bus_);
    std::string owner;
    if (!WatchOwner(kLogindName, &failure) ||
        !GetNameOwner(api_, bus_, kLogindName, kLockCallTimeoutUsec, &owner, &failure)) {
      return Fail(failure);
    }
    if (owner.empty()) {
      return EmitError("ENOENT", std::string(kLogindName) + " is not on the system bus at " + SystemBusAddress() +
                                " (systemd-logind/elogind not running)");
    }
    owners_[0] = owner;
    if (!FindSession(&failure)) return Fail(failure);
    // Object paths are [A-Za-z0-9_/] only: safe inside a quoted match value.
    std::string on_session = "type='signal',sender='org.freedesktop.login1',path='" + session_path_ + "',";
    if (!AddMatch(on_session + "interface='org.freedesktop.login1.Session',member='Lock'", &LockWatcher::OnSessionSignal,
                  &failure) ||
        !AddMatch(on_session + "interface='org.freedesktop.login1.Session',member='Unlock'",
                  &LockWatcher::OnSessionSignal, &failure) ||
        !AddMatch(on_session + "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
                               "arg0='org.freedesktop.login1.Session'",
                  &LockWatcher::OnPropertiesChanged, &failure)) {
      return Fail(failure);
    }
    auto ready = Event(LockEvent::kReady);
    ready->owner = owner;
    ready->session = session_path_;
    ready->locked = ReadLockedHint();  // after the matches: a change in between is seen twice, never missed
    Emit(std::move(ready));
    if (!RunBusLoop(api_, bus_, thread_.WakeFd(), "system bus", &failure)) Fail(failure);
  }

  // True when the message comes from the unique name that owns names[index] now; else reports it.
  bool FromOwner(sd_bus_message* m, size_t index, const char* signal, const char** sender) {
    *sender = api_->message_get_sender(m);
    if (*sender != nullptr && !owners_[index].empty() && owners_[index] == *sender) return true;
    Ignored(signal, *sender);
    return false;
  }

  static int OnSessionSignal(sd_bus_message* m, void* userdata, sd_bus_error*) {
    uint64_t at = MonotonicUsec();
    auto* self = static_cast<LockWatcher*>(userdata);
    const SdBusApi* api = self->api_;
    bool lock = api->message_is_signal(m, kSessionInterface, "Lock") > 0;
    if (!lock && api->message_is_signal(m, kSessionInterface, "Unlock") <= 0) return 0;
    const char* path = api->message_get_path(m);
    if (path == nullptr || self->session_path_ != path) return 0;
    const char* sender = nullptr;
    if (!self->FromOwner(m, 0, lock ? "Lock" : "Unlock", &sender)) return 0;
    self->Locked(lock, lock ? "Lock" : "Unlock", sender, at);
    return 0;
  }

  // PropertiesChanged(s interface, a{sv} changed, as invalidated): LockedHint only.
  static int OnPropertiesChanged(sd_bus_message* m, void* userdata, sd_bus_error*) {
    uint64_t at = MonotonicUsec();
    auto* self = static_cast<LockWatcher*>(userdata);
    const SdBusApi* api = self->api_;
    if (api->message_is_signal(m, kPropertiesInterface, "PropertiesChanged") <= 0) return 0;
    const char* path = api->message_get_path(m);
    if (path == nullptr || self->session_path_ != path) return 0;
    const char* sender = nullptr;
    if (!self->FromOwner(m, 0, "PropertiesChanged", &sender)) return 0;
    const char* iface = nullptr;
    if (api->message_read(m, "s", &iface) < 0 || iface == nullptr || std::strcmp(iface, kSessionInterface) != 0) return 0;
    int hint = -1;
    if (api->message_enter_container(m, 'a', "{sv}") <= 0) return 0;
    while (api->message_enter_container(m, 'e', "sv") > 0) {
      const char* name = nullptr;
      if (api->message_read(m, "s", &name) < 0) return 0;
      int value = 0;
      if (name != nullptr && std::strcmp(name, "LockedHint") == 0 && api->message_read(m, "v", "b", &value) >= 0) {
        hint = value != 0;
      } else if (api->message_skip(m, "v") < 0) {
        return 0;
      }
      if (api->message_exit_container(m) < 0) return 0;
    }
    if (api->message_exit_container(m) < 0) return 0;
    bool invalidated = false;
    if (api->message_enter_container(m, 'a', "s") > 0) {
      const char* name = nullptr;
      while (api->message_read(m, "s", &name) > 0) invalidated |= name != nullptr && std::strcmp(name, "LockedHint") == 0;
      api->message_exit_container(m);
    }
    // A property sent as invalidated carries no value: ask for it.
    if (hint < 0 && invalidated) hint = self->ReadLockedHint();
    if (hint >= 0) self->Locked(hint != 0, "LockedHint", sender, at);
    return 0;
  }

  // ---- the screensaver ----------------------------------------------------------

  void RunScreenSaver() {
    BusFailure failure;
    bus_ = OpenSessionBus(api_, kLockCallTimeoutUsec, &failure);
    if (bus_ == nullptr) return Fail(failure);
    BusRef bus(api_, bus_);
    for (const ScreenSaver& s : kScreenSavers) {
      if (!WatchOwner(s.name, &failure) ||
          !AddMatch(std::string("type='signal',sender='") + s.name + "',interface='" + s.name + "',member='ActiveChanged'",
                    &LockWatcher::OnActiveChanged, &failure)) {
        return Fail(failure);
      }
    }
    int locked = -1;
    for (size_t i = 0; i < kScreenSaverCount; i++) {
      if (!GetNameOwner(api_, bus_, kScreenSavers[i].name, kLockCallTimeoutUsec, &owners_[i], &failure)) return Fail(failure);
      Owner(kScreenSavers[i].name, owners_[i]);
      if (owners_[i].empty()) continue;
      MessageRef reply(api_);
      BusFailure ignored;
      int active = 0;
      if (Call(owners_[i].c_str(), kScreenSavers[i].path, kScreenSavers[i].name, "GetActive", &reply, &ignored) &&
          api_->message_read(reply.get(), "b", &active) >= 0) {
        locked = locked == 1 || active != 0;
      }
    }
    auto ready = Event(LockEvent::kReady);
    ready->locked = locked;
    Emit(std::move(ready));
    if (!RunBusLoop(api_, bus_, thread_.WakeFd(), "session bus", &failure)) Fail(failure);
  }

  static int OnActiveChanged(sd_bus_message* m, void* userdata, sd_bus_error*) {
    uint64_t at = MonotonicUsec();
    auto* self = static_cast<LockWatcher*>(userdata);
    const SdBusApi* api = self->api_;
    for (size_t i = 0; i < kScreenSaverCount; i++) {
      if (api->message_is_signal(m, kScreenSavers[i].name, "ActiveChanged") <= 0) continue;
      std::string signal = std::string(kScreenSavers[i].name) + ".ActiveChanged";
      const char* sender = nullptr;
      if (!self->FromOwner(m, i, signal.c_str(), &sender)) return 0;
      int active = 0;
      if (api->message_read(m, "b", &active) < 0) return 0;
      self->Locked(active != 0, signal, sender, at);
      return 0;
    }
    return 0;
  }

  // ---- both -----------------------------------------------------------------------

  static int OnNameOwnerChanged(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<LockWatcher*>(userdata);
    const SdBusApi* api = self->api_;
    const char* sender = api->message_get_sender(m);
    // Only the bus driver speaks for name ownership.
    if (sender == nullptr || std::strcmp(sender, "org.freedesktop.DBus") != 0) return 0;
    const char *name = nullptr, *old_owner = nullptr, *new_owner = nullptr;
    if (api->message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || name == nullptr) return 0;
    bool logind = self->Source() == "logind";
    for (size_t i = 0; i < (logind ? 1 : kScreenSaverCount); i++) {
      const char* watched = logind ? kLogindName : kScreenSavers[i].name;
      if (std::strcmp(name, watched) != 0) continue;
      self->owners_[i] = new_owner ? new_owner : "";
      self->Owner(watched, self->owners_[i]);
    }
    return 0;
  }

  const SdBusApi* api_ = nullptr;
  std::string session_id_;
  BusThread thread_;
  // Touched by the watcher thread only:
  sd_bus* bus_ = nullptr;
  std::string session_path_;
  std::string owners_[kScreenSaverCount];  // logind: [0]; screensaver: one per kScreenSavers entry
};

}  // namespace

void InitSessionLock(Napi::Env env, Napi::Object exports) { exports.Set("LockWatcher", LockWatcher::Define(env)); }

}  // namespace stash
