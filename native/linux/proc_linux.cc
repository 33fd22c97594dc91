// Process identity on Linux: pidfdOpen(pid) -> fd; pidfdSendSignal(fd, signal).
// (The parent pid and start time come from /proc in TypeScript:
// src/agent/proc-info/linux.ts.)
//
// pidfd_open + pidfd_send_signal: a pidfd names one process, not a pid number,
// so a signal sent through it can never reach a later process that reused the
// pid. The activity registry opens the pidfd, then re-reads the start time from
// /proc: if it still matches, the pidfd is known to name the registered process
// (see src/agent/proc-info/linux.ts). Called through syscall(2) because glibc gained
// wrappers only in 2.36.
#include <napi.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "../common/errors.h"
#include "../common/platform.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace stash {
namespace {

Napi::Value PidfdOpen(const Napi::CallbackInfo& info) {
  int pid = info[0].As<Napi::Number>().Int32Value();
  // pidfds are always O_CLOEXEC (the kernel sets it), so children never inherit one.
  long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) ThrowErrno(info.Env(), "pidfd_open", errno);
  return Napi::Number::New(info.Env(), double(fd));
}

Napi::Value PidfdSendSignal(const Napi::CallbackInfo& info) {
  int fd = info[0].As<Napi::Number>().Int32Value();
  int sig = info[1].As<Napi::Number>().Int32Value();
  if (syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) != 0) ThrowErrno(info.Env(), "pidfd_send_signal", errno);
  return info.Env().Undefined();
}

}  // namespace

void InitProcess(Napi::Env env, Napi::Object exports) {
  exports.Set("pidfdOpen", Napi::Function::New(env, PidfdOpen, "pidfdOpen"));
  exports.Set("pidfdSendSignal", Napi::Function::New(env, PidfdSendSignal, "pidfdSendSignal"));
}

}  // namespace stash
