// Process signalling through pidfds (Linux >= 5.3), used by the activity
// registry so that a recycled pid is never signalled; see proc_linux.cc.
#pragma once

#include <napi.h>

namespace stash {

// pidfdOpen(pid) -> fd; pidfdSendSignal(fd, signal)
void InitProcessSignals(Napi::Env env, Napi::Object exports);

}  // namespace stash
