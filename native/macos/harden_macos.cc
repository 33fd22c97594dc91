// Process hardening on macOS: PT_DENY_ATTACH refuses debuggers (including the
// same user's), RLIMIT_CORE 0 stops core files. macOS has no "dumpable" flag;
// the posture reports whether PT_DENY_ATTACH was applied in this process.
// The report around these steps is native/common/harden.cc's.
#include <napi.h>
#include <sys/ptrace.h>
#include <sys/types.h>

#include <cerrno>
#include <string>
#include <vector>

#include "../common/errors.h"
#include "../common/harden.h"
#include "../common/rlimit_posix.h"

namespace stash {
namespace {

bool g_denied = false;

}  // namespace

std::vector<std::string> ApplyHardening(Napi::Env env) {
  std::vector<std::string> steps{DisableCoreFiles(env)};
  if (ptrace(PT_DENY_ATTACH, 0, nullptr, 0) != 0) ThrowErrno(env, "ptrace(PT_DENY_ATTACH)", errno);
  g_denied = true;
  steps.emplace_back("ptrace(PT_DENY_ATTACH)");
  return steps;
}

void DescribePosture(Napi::Env env, Napi::Object out) {
  out.Set("dumpable", Napi::Boolean::New(env, !g_denied));
  DescribeLimits(env, out);
}

}  // namespace stash
