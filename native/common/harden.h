// The per-OS half of hardenProcess() and processPosture(): each platform's
// harden_<os>.cc defines these two; native/common/harden.cc builds the report
// around them, which is the same everywhere:
//   processPosture() -> {dumpable, coreLimit, memlockLimit}
//   hardenProcess()  -> that posture after hardening, plus {actions, coreDumpsDisabled, ptraceBlocked}
#pragma once

#include <napi.h>

#include <string>
#include <vector>

namespace stash {

// Hardens this process: keeps its memory from other processes of the same user
// and out of crash dumps. Throws (ThrowErrno/ThrowWin32) when a step fails;
// returns the steps taken, in order, as the report names them.
std::vector<std::string> ApplyHardening(Napi::Env env);

// Sets `dumpable` (bool), `coreLimit` and `memlockLimit` ({soft, hard}, or null
// where the OS has no such limit) on `out`.
void DescribePosture(Napi::Env env, Napi::Object out);

}  // namespace stash
