// Process hardening on Linux: no core dumps and no same-user ptrace.
// PR_SET_DUMPABLE 0 also makes /proc/<pid>/mem and ptrace attach require
// CAP_SYS_PTRACE, so another process of the same user cannot read the keys.
// The report around these steps is native/common/harden.cc's.
#include <napi.h>
#include <sys/prctl.h>

#include <cerrno>
#include <string>
#include <vector>

#include "../common/errors.h"
#include "../common/harden.h"
#include "../common/rlimit_posix.h"

namespace stash {

std::vector<std::string> ApplyHardening(Napi::Env env) {
  std::vector<std::string> steps{DisableCoreFiles(env)};
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) ThrowErrno(env, "prctl(PR_SET_DUMPABLE)", errno);
  steps.emplace_back("prctl(PR_SET_DUMPABLE, 0)");
  return steps;
}

void DescribePosture(Napi::Env env, Napi::Object out) {
  int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  if (dumpable < 0) ThrowErrno(env, "prctl(PR_GET_DUMPABLE)", errno);
  out.Set("dumpable", Napi::Boolean::New(env, dumpable != 0));
  DescribeLimits(env, out);
}

}  // namespace stash
