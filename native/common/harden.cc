// hardenProcess() and processPosture(): the report is the same on every OS;
// what hardening means, and what the posture holds, is each OS's
// (native/<os>/harden_<os>.cc, through native/common/harden.h).
#include "harden.h"

#include <napi.h>

#include "platform.h"

namespace stash {
namespace {

Napi::Object Posture(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  DescribePosture(env, out);
  return out;
}

Napi::Value HardenProcess(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<std::string> steps = ApplyHardening(env);
  Napi::Object out = Posture(env);
  Napi::Array actions = Napi::Array::New(env, steps.size());
  for (size_t i = 0; i < steps.size(); i++) actions.Set(uint32_t(i), Napi::String::New(env, steps[i]));
  out.Set("actions", actions);
  // ApplyHardening throws unless every step held.
  out.Set("coreDumpsDisabled", Napi::Boolean::New(env, true));
  out.Set("ptraceBlocked", Napi::Boolean::New(env, true));
  return out;
}

Napi::Value ProcessPosture(const Napi::CallbackInfo& info) { return Posture(info.Env()); }

}  // namespace

void InitHarden(Napi::Env env, Napi::Object exports) {
  exports.Set("hardenProcess", Napi::Function::New(env, HardenProcess, "hardenProcess"));
  exports.Set("processPosture", Napi::Function::New(env, ProcessPosture, "processPosture"));
}

}  // namespace stash
