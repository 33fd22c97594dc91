// sd-bus, loaded at run time with dlopen: libsystemd.so.0 first, then
// libelogind.so.0 (elogind systems ship the same sd-bus ABI under that name).
// Building needs no -dev headers; a machine without either library still loads
// the addon and reports logind as unavailable.
//
// The prototypes below are copied from systemd's public <systemd/sd-bus.h>,
// which has kept them ABI-stable since sd-bus became public (systemd 221).
#pragma once

#include <cstdint>
#include <string>

namespace stash {

struct sd_bus;
struct sd_bus_message;
struct sd_bus_slot;

// Layout of sd_bus_error from sd-bus.h; SD_BUS_ERROR_NULL is all zeroes.
struct sd_bus_error {
  const char* name;
  const char* message;
  int _need_free;
};

typedef int (*sd_bus_message_handler_t)(sd_bus_message* m, void* userdata, sd_bus_error* ret_error);

struct SdBusApi {
  std::string library;  // the soname that was loaded

  int (*open_system)(sd_bus** ret);
  int (*open_user)(sd_bus** ret);
  sd_bus* (*flush_close_unref)(sd_bus* bus);
  int (*message_new_method_call)(sd_bus* bus, sd_bus_message** m, const char* destination, const char* path,
                                 const char* interface, const char* member);
  int (*message_append)(sd_bus_message* m, const char* types, ...);
  int (*call)(sd_bus* bus, sd_bus_message* m, uint64_t usec, sd_bus_error* ret_error, sd_bus_message** reply);
  int (*message_read)(sd_bus_message* m, const char* types, ...);
  int (*message_enter_container)(sd_bus_message* m, char type, const char* contents);
  int (*message_exit_container)(sd_bus_message* m);
  int (*message_skip)(sd_bus_message* m, const char* types);
  sd_bus_message* (*message_unref)(sd_bus_message* m);
  const char* (*message_get_sender)(sd_bus_message* m);
  const char* (*message_get_path)(sd_bus_message* m);
  int (*message_is_signal)(sd_bus_message* m, const char* interface, const char* member);
  void (*error_free)(sd_bus_error* e);
  int (*add_match)(sd_bus* bus, sd_bus_slot** slot, const char* match, sd_bus_message_handler_t callback,
                   void* userdata);
  int (*process)(sd_bus* bus, sd_bus_message** r);
  int (*get_fd)(sd_bus* bus);
  int (*get_events)(sd_bus* bus);
  int (*get_timeout)(sd_bus* bus, uint64_t* timeout_usec);
  // Optional (systemd >= 240): bounds the synchronous AddMatch/GetNameOwner calls.
  int (*set_method_call_timeout)(sd_bus* bus, uint64_t usec);
};

// The loaded API, or nullptr with *error set. Loads once; thread-safe.
const SdBusApi* LoadSdBus(std::string* error);

// Owns an sd_bus connection; flushes and closes it on scope exit.
class BusRef {
 public:
  BusRef(const SdBusApi* api, sd_bus* bus) : api_(api), bus_(bus) {}
  ~BusRef() {
    if (bus_) api_->flush_close_unref(bus_);
  }
  BusRef(const BusRef&) = delete;
  BusRef& operator=(const BusRef&) = delete;
  sd_bus* get() const { return bus_; }

 private:
  const SdBusApi* api_;
  sd_bus* bus_;
};

// Owns an sd_bus_message reference.
class MessageRef {
 public:
  explicit MessageRef(const SdBusApi* api) : api_(api) {}
  ~MessageRef() {
    if (m_) api_->message_unref(m_);
  }
  MessageRef(const MessageRef&) = delete;
  MessageRef& operator=(const MessageRef&) = delete;
  sd_bus_message** out() { return &m_; }
  sd_bus_message* get() const { return m_; }

 private:
  const SdBusApi* api_;
  sd_bus_message* m_ = nullptr;
};

// The result of a failed bus operation: an errno name for `code`, a message
// that names the call, and the D-Bus error name when the peer sent one.
struct BusFailure {
  std::string code;
  std::string message;
  std::string dbus_name;
};

// Fills `out` from a negative sd-bus return value and an optional sd_bus_error.
void DescribeBusFailure(const char* what, int r, const sd_bus_error* error, BusFailure* out);

// logind's bus name (the power and the lock watchers both call it).
inline constexpr const char* kLogindName = "org.freedesktop.login1";

// The system bus address in use, for messages ("default" when the variable is unset).
std::string SystemBusAddress();

// Opens a private system-bus connection with method calls bounded by
// `timeout_usec`. Returns nullptr and fills `failure` on error.
sd_bus* OpenSystemBus(const SdBusApi* api, uint64_t timeout_usec, BusFailure* failure);

// The session bus address in use, for messages (DBUS_SESSION_BUS_ADDRESS, else
// sd-bus's fallback $XDG_RUNTIME_DIR/bus).
std::string SessionBusAddress();

// The same for the user's session bus.
sd_bus* OpenSessionBus(const SdBusApi* api, uint64_t timeout_usec, BusFailure* failure);

// CLOCK_MONOTONIC in microseconds: the clock of sd-bus timeouts, and the one
// process.hrtime reads on Linux.
uint64_t MonotonicUsec();

// Dispatches `bus` (its match callbacks run on this thread) until `wake_fd`
// becomes readable: returns true then, false with `failure` filled when the
// bus fails ("lost the <which> connection"). A watcher thread's whole life
// after its setup.
bool RunBusLoop(const SdBusApi* api, sd_bus* bus, int wake_fd, const char* which, BusFailure* failure);

// org.freedesktop.DBus.GetNameOwner(name): true with the unique name in *owner,
// true with an empty *owner when the name has no owner, false on other errors.
bool GetNameOwner(const SdBusApi* api, sd_bus* bus, const char* name, uint64_t timeout_usec, std::string* owner,
                  BusFailure* failure);

}  // namespace stash
