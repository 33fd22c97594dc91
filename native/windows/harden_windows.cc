// Process hardening on Windows: replace the process DACL so that only SYSTEM has
// full access and the owner keeps just query/synchronize/terminate. Other
// processes of the same user then cannot open this one with PROCESS_VM_READ
// (ReadProcessMemory) or inject threads. An administrator holding
// SeDebugPrivilege still can; that is outside what a user process can stop.
// Windows Error Reporting dumps are suppressed with SetErrorMode.
// The report around these steps is native/common/harden.cc's.
#include <windows.h>
#include <aclapi.h>
#include <napi.h>

#include <string>
#include <vector>

#include "../common/harden.h"
#include "win_error.h"
#include "win_token.h"

namespace stash {
namespace {

bool g_hardened = false;

}  // namespace

std::vector<std::string> ApplyHardening(Napi::Env env) {
  std::vector<BYTE> user;
  DWORD token_err = TokenUserOf(GetCurrentProcess(), &user);
  if (token_err != ERROR_SUCCESS) ThrowWin32(env, "GetTokenInformation(TokenUser)", token_err);
  PSID userSid = SidOf(user);

  BYTE systemSidBuf[SECURITY_MAX_SID_SIZE];
  DWORD systemSidSize = sizeof(systemSidBuf);
  if (!CreateWellKnownSid(WinLocalSystemSid, nullptr, systemSidBuf, &systemSidSize)) {
    ThrowWin32(env, "CreateWellKnownSid", GetLastError());
  }

  EXPLICIT_ACCESSW access[2] = {};
  access[0].grfAccessPermissions = PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE | PROCESS_TERMINATE;
  access[0].grfAccessMode = SET_ACCESS;
  access[0].grfInheritance = NO_INHERITANCE;
  access[0].Trustee.TrusteeForm = TRUSTEE_IS_SID;
  access[0].Trustee.TrusteeType = TRUSTEE_IS_USER;
  access[0].Trustee.ptstrName = reinterpret_cast<LPWSTR>(userSid);
  access[1].grfAccessPermissions = PROCESS_ALL_ACCESS;
  access[1].grfAccessMode = SET_ACCESS;
  access[1].grfInheritance = NO_INHERITANCE;
  access[1].Trustee.TrusteeForm = TRUSTEE_IS_SID;
  access[1].Trustee.TrusteeType = TRUSTEE_IS_WELL_KNOWN_GROUP;
  access[1].Trustee.ptstrName = reinterpret_cast<LPWSTR>(systemSidBuf);

  PACL dacl = nullptr;
  DWORD rc = SetEntriesInAclW(2, access, nullptr, &dacl);
  if (rc != ERROR_SUCCESS) ThrowWin32(env, "SetEntriesInAcl", rc);
  rc = SetSecurityInfo(GetCurrentProcess(), SE_KERNEL_OBJECT,
                       DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                       nullptr, nullptr, dacl, nullptr);
  LocalFree(dacl);
  if (rc != ERROR_SUCCESS) ThrowWin32(env, "SetSecurityInfo", rc);
  SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
  g_hardened = true;
  return {"SetSecurityInfo(process DACL: owner without PROCESS_VM_READ)", "SetErrorMode(SEM_NOGPFAULTERRORBOX)"};
}

// Windows has no core or memlock rlimit.
void DescribePosture(Napi::Env env, Napi::Object out) {
  out.Set("dumpable", Napi::Boolean::New(env, !g_hardened));
  out.Set("coreLimit", env.Null());
  out.Set("memlockLimit", env.Null());
}

}  // namespace stash
