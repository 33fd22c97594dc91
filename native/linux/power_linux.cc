// Suspend protection on Linux through systemd-logind (or elogind) on the system bus.
//
//   powerProbe()                         -> Promise<{available, backend, library, owner, reason}>
//   powerInhibit(what, who, why, mode)   -> Promise<fd>   (Manager.Inhibit; the fd IS the lock)
//   powerRelease(fd)                     -> close(fd): logind drops the inhibitor
//   new PowerWatcher(callback)           -> a thread with its own bus connection that reports
//        {type:'ready', owner} | {type:'sleep', start, sender} | {type:'owner', owner}
//        | {type:'ignored', sender} | {type:'error', code, message}
//
// Bus calls run off the JS thread (AsyncWorker, or the watcher thread), each on
// a private connection: an sd_bus object must only ever be used by one thread.
// Policy (when to take or drop which lock) lives in src/agent/power/linux.ts.
#include <napi.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "../common/event_watcher.h"
#include "../common/errors.h"
#include "../common/power_event.h"
#include "../common/platform.h"
#include "bus_thread_linux.h"
#include "sdbus_linux.h"

namespace stash {
namespace {

constexpr const char* kLogindPath = "/org/freedesktop/login1";
constexpr const char* kManagerInterface = "org.freedesktop.login1.Manager";
// logind answers Inhibit in well under a millisecond; a stuck bus must not pin a
// libuv pool thread for sd-bus's default 25 s.
constexpr uint64_t kPowerCallTimeoutUsec = 5 * 1000 * 1000;
// The watcher's setup calls (AddMatch, GetNameOwner) block stop() until they return.
constexpr uint64_t kWatcherCallTimeoutUsec = 2 * 1000 * 1000;

Napi::Error FailureError(Napi::Env env, const BusFailure& f) {
  Napi::Error error = Napi::Error::New(env, f.message);
  error.Set("code", Napi::String::New(env, f.code));
  if (!f.dbus_name.empty()) error.Set("dbusError", Napi::String::New(env, f.dbus_name));
  return error;
}

// An AsyncWorker that settles a promise; subclasses fill failure_ or a result.
class BusWorker : public Napi::AsyncWorker {
 public:
  explicit BusWorker(Napi::Env env) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void OnOK() override {
    Napi::HandleScope scope(Env());
    if (failed_) {
      deferred_.Reject(FailureError(Env(), failure_).Value());
    } else {
      deferred_.Resolve(Result(Env()));
    }
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }
  virtual Napi::Value Result(Napi::Env env) = 0;

  const SdBusApi* Api() {
    std::string error;
    const SdBusApi* api = LoadSdBus(&error);
    if (api == nullptr) Fail("ELIBACC", error);
    return api;
  }
  void Fail(const std::string& code, const std::string& message) {
    failed_ = true;
    failure_.code = code;
    failure_.message = message;
  }

  Napi::Promise::Deferred deferred_;
  BusFailure failure_;
  bool failed_ = false;
};

class ProbeWorker : public BusWorker {
 public:
  using BusWorker::BusWorker;

 protected:
  void Execute() override {
    std::string error;
    api_ = LoadSdBus(&error);
    if (api_ == nullptr) {
      reason_ = error;
      return;
    }
    BusFailure failure;
    sd_bus* raw = OpenSystemBus(api_, kPowerCallTimeoutUsec, &failure);
    if (raw == nullptr) {
      reason_ = failure.message;
      return;
    }
    BusRef bus(api_, raw);
    if (!GetNameOwner(api_, bus.get(), kLogindName, kPowerCallTimeoutUsec, &owner_, &failure)) {
      reason_ = failure.message;
    } else if (owner_.empty()) {
      reason_ = std::string(kLogindName) + " is not on the system bus at " + SystemBusAddress() +
                " (systemd-logind/elogind not running)";
    }
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("available", Napi::Boolean::New(env, reason_.empty()));
    out.Set("backend", Napi::String::New(env, "logind"));
    out.Set("library", api_ ? Napi::Value(Napi::String::New(env, api_->library)) : env.Null());
    out.Set("owner", owner_.empty() ? env.Null() : Napi::Value(Napi::String::New(env, owner_)));
    out.Set("reason", reason_.empty() ? env.Null() : Napi::Value(Napi::String::New(env, reason_)));
    return out;
  }

 private:
  const SdBusApi* api_ = nullptr;
  std::string owner_;
  std::string reason_;
};

class InhibitWorker : public BusWorker {
 public:
  InhibitWorker(Napi::Env env, std::string what, std::string who, std::string why, std::string mode)
      : BusWorker(env), what_(std::move(what)), who_(std::move(who)), why_(std::move(why)), mode_(std::move(mode)) {}

 protected:
  void Execute() override {
    const SdBusApi* api = Api();
    if (api == nullptr) return;
    sd_bus* raw = OpenSystemBus(api, kPowerCallTimeoutUsec, &failure_);
    if (raw == nullptr) {
      failed_ = true;
      return;
    }
    BusRef bus(api, raw);
    MessageRef call(api);
    int r = api->message_new_method_call(bus.get(), call.out(), kLogindName, kLogindPath, kManagerInterface, "Inhibit");
    if (r >= 0) r = api->message_append(call.get(), "ssss", what_.c_str(), who_.c_str(), why_.c_str(), mode_.c_str());
    if (r < 0) {
      failed_ = true;
      DescribeBusFailure("Inhibit", r, nullptr, &failure_);
      return;
    }
    sd_bus_error error{nullptr, nullptr, 0};
    MessageRef reply(api);
    r = api->call(bus.get(), call.get(), kPowerCallTimeoutUsec, &error, reply.out());
    if (r < 0) {
      failed_ = true;
      DescribeBusFailure("Inhibit", r, &error, &failure_);
      api->error_free(&error);
      return;
    }
    int fd = -1;
    r = api->message_read(reply.get(), "h", &fd);
    if (r < 0 || fd < 0) {
      failed_ = true;
      DescribeBusFailure("Inhibit reply", r < 0 ? r : -EBADMSG, nullptr, &failure_);
      return;
    }
    // The reply owns `fd` and closes it with the message. CLOEXEC so that no
    // child the agent spawns can keep the lock alive after the agent lets go.
    fd_ = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (fd_ < 0) {
      failed_ = true;
      DescribeBusFailure("fcntl(F_DUPFD_CLOEXEC)", -errno, nullptr, &failure_);
    }
  }

  Napi::Value Result(Napi::Env env) override { return Napi::Number::New(env, fd_); }

 private:
  std::string what_, who_, why_, mode_;
  int fd_ = -1;
};

Napi::Value PowerProbe(const Napi::CallbackInfo& info) {
  auto* worker = new ProbeWorker(info.Env());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Value PowerInhibit(const Napi::CallbackInfo& info) {
  auto* worker = new InhibitWorker(info.Env(), info[0].As<Napi::String>().Utf8Value(),
                                   info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::String>().Utf8Value(),
                                   info[3].As<Napi::String>().Utf8Value());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Value PowerRelease(const Napi::CallbackInfo& info) {
  int fd = info[0].As<Napi::Number>().Int32Value();
  // Linux close() frees the descriptor even when it reports EINTR; never retry.
  if (close(fd) != 0 && errno != EINTR) ThrowErrno(info.Env(), "close", errno);
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
    api_ = LoadSdBusOrThrow(info.Env());
    thread_.Start(info.Env(), [this]() { Run(); });
  }

  ~PowerWatcher() override { Shutdown(false); }

  // Called once by EventWatcher::Shutdown.
  void Halt() { thread_.Stop(); }

 private:
  // Linux has nothing to allow: the delay lock is the inhibitor fd, which the
  // TypeScript side closes. Present so that every platform has the same shape.
  Napi::Value AllowSleep(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), false); }

  void EmitFailure(const BusFailure& f) { Emit(PowerEvent::Error(f.code, f.message)); }

  // ready and owner: logind's unique name now (empty: not on the bus).
  void ReportOwner(PowerEvent::Kind kind) {
    auto ev = PowerEvent::Make(kind);
    ev->owner = owner_;
    Emit(std::move(ev));
  }

  static int OnPrepareForSleep(sd_bus_message* m, void* userdata, sd_bus_error*) {
    uint64_t at = MonotonicUsec();
    auto* self = static_cast<PowerWatcher*>(userdata);
    const SdBusApi* api = self->api_;
    if (api->message_is_signal(m, kManagerInterface, "PrepareForSleep") <= 0) return 0;
    const char* path = api->message_get_path(m);
    if (path == nullptr || std::strcmp(path, kLogindPath) != 0) return 0;
    // The match rule already asks the bus for sender=org.freedesktop.login1;
    // this checks the unique name too, so that only the process that owns the
    // logind name right now can make the agent drop its lock.
    const char* sender = api->message_get_sender(m);
    if (sender == nullptr || self->owner_.empty() || self->owner_ != sender) {
      auto ev = PowerEvent::Make(PowerEvent::kIgnored);
      ev->sender = sender ? sender : "";
      self->Emit(std::move(ev));
      return 0;
    }
    int start = 0;
    if (api->message_read(m, "b", &start) < 0) return 0;
    auto ev = PowerEvent::Sleep(start != 0, -1);
    ev->sender = sender;
    ev->at_us = double(at);
    self->Emit(std::move(ev));
    return 0;
  }

  static int OnNameOwnerChanged(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<PowerWatcher*>(userdata);
    const SdBusApi* api = self->api_;
    const char* sender = api->message_get_sender(m);
    // Only the bus driver speaks for name ownership.
    if (sender == nullptr || std::strcmp(sender, "org.freedesktop.DBus") != 0) return 0;
    const char *name = nullptr, *old_owner = nullptr, *new_owner = nullptr;
    if (api->message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || name == nullptr) return 0;
    if (std::strcmp(name, kLogindName) != 0) return 0;
    self->owner_ = new_owner ? new_owner : "";
    self->ReportOwner(PowerEvent::kOwner);
    return 0;
  }

  void Run() {
    BusFailure failure;
    sd_bus* raw = OpenSystemBus(api_, kWatcherCallTimeoutUsec, &failure);
    if (raw == nullptr) return EmitFailure(failure);
    BusRef bus(api_, raw);
    // NameOwnerChanged first: an owner change between GetNameOwner and the
    // signal match would otherwise go unseen.
    int r = api_->add_match(bus.get(), nullptr,
                            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                            "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.freedesktop.login1'",
                            &PowerWatcher::OnNameOwnerChanged, this);
    if (r >= 0) {
      r = api_->add_match(bus.get(), nullptr,
                          "type='signal',sender='org.freedesktop.login1',path='/org/freedesktop/login1',"
                          "interface='org.freedesktop.login1.Manager',member='PrepareForSleep'",
                          &PowerWatcher::OnPrepareForSleep, this);
    }
    if (r < 0) {
      DescribeBusFailure("AddMatch", r, nullptr, &failure);
      return EmitFailure(failure);
    }
    if (!GetNameOwner(api_, bus.get(), kLogindName, kWatcherCallTimeoutUsec, &owner_, &failure)) {
      return EmitFailure(failure);
    }
    ReportOwner(PowerEvent::kReady);
    if (!RunBusLoop(api_, bus.get(), thread_.WakeFd(), "system bus", &failure)) EmitFailure(failure);
  }

  const SdBusApi* api_ = nullptr;
  BusThread thread_;
  std::string owner_;  // touched by the watcher thread only
};

}  // namespace

void InitPower(Napi::Env env, Napi::Object exports) {
  exports.Set("powerProbe", Napi::Function::New(env, PowerProbe, "powerProbe"));
  exports.Set("powerInhibit", Napi::Function::New(env, PowerInhibit, "powerInhibit"));
  exports.Set("powerRelease", Napi::Function::New(env, PowerRelease, "powerRelease"));
  exports.Set("PowerWatcher", PowerWatcher::Define(env));
}

}  // namespace stash
