// Run-time loading of sd-bus (see sdbus_linux.h) and the few bus helpers the
// logind code shares: open a bounded connection, GetNameOwner, error text.
#include "sdbus_linux.h"

#include <dlfcn.h>
#include <poll.h>
#include <time.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../common/errors.h"

namespace stash {
namespace {

SdBusApi g_api;
const SdBusApi* g_loaded = nullptr;
std::string g_load_error;
std::once_flag g_once;

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
    return false;
  }
  return true;
}

void Load() {
  // Only the runtime sonames: the unversioned .so symlinks belong to -dev packages.
  const char* names[] = {"libsystemd.so.0", "libelogind.so.0"};
  std::string errors;
  for (const char* name : names) {
    // RTLD_LOCAL: sd-bus symbols must not leak into the global namespace of node.
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      if (!errors.empty()) errors += "; ";
      errors += e ? e : name;
      continue;
    }
    std::string missing;
    bool ok = true;
    ok &= Resolve(handle, "sd_bus_open_system", &g_api.open_system, &missing);
    ok &= Resolve(handle, "sd_bus_open_user", &g_api.open_user, &missing);
    ok &= Resolve(handle, "sd_bus_flush_close_unref", &g_api.flush_close_unref, &missing);
    ok &= Resolve(handle, "sd_bus_message_new_method_call", &g_api.message_new_method_call, &missing);
    ok &= Resolve(handle, "sd_bus_message_append", &g_api.message_append, &missing);
    ok &= Resolve(handle, "sd_bus_call", &g_api.call, &missing);
    ok &= Resolve(handle, "sd_bus_message_read", &g_api.message_read, &missing);
    ok &= Resolve(handle, "sd_bus_message_enter_container", &g_api.message_enter_container, &missing);
    ok &= Resolve(handle, "sd_bus_message_exit_container", &g_api.message_exit_container, &missing);
    ok &= Resolve(handle, "sd_bus_message_skip", &g_api.message_skip, &missing);
    ok &= Resolve(handle, "sd_bus_message_unref", &g_api.message_unref, &missing);
    ok &= Resolve(handle, "sd_bus_message_get_sender", &g_api.message_get_sender, &missing);
    ok &= Resolve(handle, "sd_bus_message_get_path", &g_api.message_get_path, &missing);
    ok &= Resolve(handle, "sd_bus_message_is_signal", &g_api.message_is_signal, &missing);
    ok &= Resolve(handle, "sd_bus_error_free", &g_api.error_free, &missing);
    ok &= Resolve(handle, "sd_bus_add_match", &g_api.add_match, &missing);
    ok &= Resolve(handle, "sd_bus_process", &g_api.process, &missing);
    ok &= Resolve(handle, "sd_bus_get_fd", &g_api.get_fd, &missing);
    ok &= Resolve(handle, "sd_bus_get_events", &g_api.get_events, &missing);
    ok &= Resolve(handle, "sd_bus_get_timeout", &g_api.get_timeout, &missing);
    if (!ok) {
      if (!errors.empty()) errors += "; ";
      errors += std::string(name) + " lacks " + missing;
      dlclose(handle);
      continue;
    }
    g_api.set_method_call_timeout =
        reinterpret_cast<decltype(g_api.set_method_call_timeout)>(dlsym(handle, "sd_bus_set_method_call_timeout"));
    g_api.library = name;
    // The handle is never closed: watcher threads may use the library until process exit.
    g_loaded = &g_api;
    return;
  }
  g_load_error = "sd-bus is not available (" + errors + ")";
}

}  // namespace

const SdBusApi* LoadSdBus(std::string* error) {
  std::call_once(g_once, Load);
  if (g_loaded == nullptr && error != nullptr) *error = g_load_error;
  return g_loaded;
}

void DescribeBusFailure(const char* what, int r, const sd_bus_error* error, BusFailure* out) {
  int err = r < 0 ? -r : EIO;
  const char* name = ErrnoName(err);
  out->code = name ? name : "E" + std::to_string(err);
  out->message = what;
  out->message += ": ";
  if (error != nullptr && error->name != nullptr) {
    out->dbus_name = error->name;
    out->message += error->name;
    if (error->message != nullptr) {
      out->message += ": ";
      out->message += error->message;
    }
  } else {
    out->message += std::strerror(err);
  }
}

std::string SystemBusAddress() {
  const char* addr = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
  return addr && *addr ? addr : "unix:path=/run/dbus/system_bus_socket (default)";
}

sd_bus* OpenSystemBus(const SdBusApi* api, uint64_t timeout_usec, BusFailure* failure) {
  sd_bus* bus = nullptr;
  int r = api->open_system(&bus);
  if (r < 0) {
    std::string what = "cannot connect to the system bus at " + SystemBusAddress();
    DescribeBusFailure(what.c_str(), r, nullptr, failure);
    return nullptr;
  }
  if (api->set_method_call_timeout) api->set_method_call_timeout(bus, timeout_usec);
  return bus;
}

std::string SessionBusAddress() {
  const char* addr = std::getenv("DBUS_SESSION_BUS_ADDRESS");
  if (addr && *addr) return addr;
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  return runtime && *runtime ? std::string("unix:path=") + runtime + "/bus (from XDG_RUNTIME_DIR)"
                             : "none (neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set)";
}

sd_bus* OpenSessionBus(const SdBusApi* api, uint64_t timeout_usec, BusFailure* failure) {
  sd_bus* bus = nullptr;
  int r = api->open_user(&bus);
  if (r < 0) {
    std::string what = "cannot connect to the session bus at " + SessionBusAddress();
    DescribeBusFailure(what.c_str(), r, nullptr, failure);
    return nullptr;
  }
  if (api->set_method_call_timeout) api->set_method_call_timeout(bus, timeout_usec);
  return bus;
}

uint64_t MonotonicUsec() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000u + uint64_t(ts.tv_nsec) / 1000u;
}

bool RunBusLoop(const SdBusApi* api, sd_bus* bus, int wake_fd, const char* which, BusFailure* failure) {
  int bus_fd = api->get_fd(bus);
  if (bus_fd < 0) {
    DescribeBusFailure("sd_bus_get_fd", bus_fd, nullptr, failure);
    return false;
  }
  for (;;) {
    int r = api->process(bus, nullptr);
    if (r < 0) {
      std::string what = std::string("lost the ") + which + " connection";
      DescribeBusFailure(what.c_str(), r, nullptr, failure);
      return false;
    }
    if (r > 0) continue;  // more may be queued
    int events = api->get_events(bus);
    if (events < 0) {
      DescribeBusFailure("sd_bus_get_events", events, nullptr, failure);
      return false;
    }
    uint64_t until = UINT64_MAX;
    api->get_timeout(bus, &until);
    int timeout_ms = -1;
    if (until != UINT64_MAX) {
      uint64_t now = MonotonicUsec();  // sd-bus timeouts are absolute CLOCK_MONOTONIC
      uint64_t left = until > now ? (until - now + 999) / 1000 : 0;
      timeout_ms = left > uint64_t(INT_MAX) ? INT_MAX : int(left);
    }
    struct pollfd fds[2] = {{bus_fd, short(events), 0}, {wake_fd, POLLIN, 0}};
    r = poll(fds, 2, timeout_ms);
    if (r < 0 && errno != EINTR) {
      DescribeBusFailure("poll", -errno, nullptr, failure);
      return false;
    }
    if (r > 0 && (fds[1].revents & POLLIN)) return true;  // asked to stop
  }
}

bool GetNameOwner(const SdBusApi* api, sd_bus* bus, const char* name, uint64_t timeout_usec, std::string* owner,
                  BusFailure* failure) {
  MessageRef call(api);
  int r = api->message_new_method_call(bus, call.out(), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetNameOwner");
  if (r >= 0) r = api->message_append(call.get(), "s", name);
  if (r < 0) {
    DescribeBusFailure("GetNameOwner", r, nullptr, failure);
    return false;
  }
  sd_bus_error error{nullptr, nullptr, 0};
  MessageRef reply(api);
  r = api->call(bus, call.get(), timeout_usec, &error, reply.out());
  if (r < 0) {
    bool no_owner = error.name != nullptr && std::strcmp(error.name, "org.freedesktop.DBus.Error.NameHasNoOwner") == 0;
    if (!no_owner) DescribeBusFailure("GetNameOwner", r, &error, failure);
    api->error_free(&error);
    if (no_owner) owner->clear();
    return no_owner;
  }
  const char* unique = nullptr;
  r = api->message_read(reply.get(), "s", &unique);
  if (r < 0 || unique == nullptr) {
    DescribeBusFailure("GetNameOwner reply", r, nullptr, failure);
    return false;
  }
  *owner = unique;
  return true;
}

}  // namespace stash
