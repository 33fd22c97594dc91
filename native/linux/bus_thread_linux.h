// The thread of a Linux bus watcher (power_linux.cc, lock_linux.cc): each one
// runs its own sd-bus connection on a thread of its own, in RunBusLoop, which
// also polls an eventfd so that stop() can wake it. Start() makes the eventfd
// and the thread on the JS thread; Stop() (the watcher's Halt) wakes the loop,
// joins the thread and closes the eventfd.
#pragma once

#include <napi.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <thread>
#include <utility>

#include "../common/errors.h"
#include "sdbus_linux.h"

namespace stash {

// sd-bus, or an ELIBACC error when neither libsystemd nor libelogind loads.
inline const SdBusApi* LoadSdBusOrThrow(Napi::Env env) {
  std::string error;
  const SdBusApi* api = LoadSdBus(&error);
  if (api == nullptr) ThrowCode(env, "ELIBACC", error);
  return api;
}

class BusThread {
 public:
  BusThread() = default;
  BusThread(const BusThread&) = delete;
  BusThread& operator=(const BusThread&) = delete;
  ~BusThread() { Stop(); }

  // Runs `run` on a new thread; it hands WakeFd() to RunBusLoop. Throws on the JS thread.
  template <typename Run>
  void Start(Napi::Env env, Run run) {
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) ThrowErrno(env, "eventfd", errno);
    thread_ = std::thread(std::move(run));
  }

  int WakeFd() const { return wake_fd_; }

  // Wakes the loop and joins the thread. Idempotent.
  void Stop() {
    if (wake_fd_ < 0) return;
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
    if (thread_.joinable()) thread_.join();
    close(wake_fd_);
    wake_fd_ = -1;
  }

 private:
  int wake_fd_ = -1;
  std::thread thread_;
};

}  // namespace stash
