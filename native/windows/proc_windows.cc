// Process identity on Windows, for the activity registry (src/agent/proc-info/win32.ts):
//
//   processInfo(pid) -> {ppid, startTime, zombie} | null   (creation time, Toolhelp parent pid)
//
// startTime is the creation FILETIME as a decimal string: with the pid it names
// one process for the life of the boot.
#include <windows.h>
#include <tlhelp32.h>
#include <napi.h>

#include <string>

#include "../common/platform.h"

namespace stash {
namespace {

Napi::Value ProcessInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  DWORD pid = info[0].As<Napi::Number>().Uint32Value();
  HANDLE process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
  if (!process) return env.Null();
  FILETIME created{}, exited{}, kernel{}, user{};
  DWORD exit_code = 0;
  BOOL ok = GetProcessTimes(process, &created, &exited, &kernel, &user);
  BOOL have_exit = GetExitCodeProcess(process, &exit_code);
  CloseHandle(process);
  if (!ok) return env.Null();
  // The parent pid is only in the Toolhelp snapshot. Windows does not re-parent
  // orphans, so a parent pid may name a newer process: the TypeScript side
  // checks that the parent started before the child.
  DWORD ppid = 0;
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snap != INVALID_HANDLE_VALUE) {
    PROCESSENTRY32W entry{};
    entry.dwSize = sizeof(entry);
    for (BOOL more = Process32FirstW(snap, &entry); more; more = Process32NextW(snap, &entry)) {
      if (entry.th32ProcessID == pid) {
        ppid = entry.th32ParentProcessID;
        break;
      }
    }
    CloseHandle(snap);
  }
  ULONGLONG start = (ULONGLONG(created.dwHighDateTime) << 32) | created.dwLowDateTime;
  Napi::Object out = Napi::Object::New(env);
  out.Set("ppid", Napi::Number::New(env, ppid));
  out.Set("startTime", Napi::String::New(env, std::to_string(start)));
  out.Set("zombie", Napi::Boolean::New(env, have_exit && exit_code != STILL_ACTIVE));
  return out;
}

}  // namespace

void InitProcess(Napi::Env env, Napi::Object exports) {
  exports.Set("processInfo", Napi::Function::New(env, ProcessInfo, "processInfo"));
}

}  // namespace stash
