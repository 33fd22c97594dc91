// The per-platform half of the addon. Every platform folder (native/linux,
// native/macos, native/windows) defines each of these once, but InitHarden,
// which native/common/harden.cc defines around each platform's steps; binding.gyp
// adds exactly one platform's sources, so there is one definition per build.
#pragma once

#include <napi.h>

namespace stash {

// peerCredentials(fd) -> {pid, uid, gid}
void InitPeer(Napi::Env env, Napi::Object exports);
// hardenProcess() -> report; processPosture() -> current state. Defined once in
// native/common/harden.cc, around each platform's steps (native/common/harden.h).
void InitHarden(Napi::Env env, Napi::Object exports);
// openSystemLog(ident), systemLog(level, message), closeSystemLog()
void InitSystemLog(Napi::Env env, Napi::Object exports);
// powerProbe(), powerInhibit(what, who, why, mode), powerRelease(handle),
// class PowerWatcher(callback) {stop(), allowSleep(id)}
// (native/<os>/power_<os>.cc).
void InitPower(Napi::Env env, Napi::Object exports);
// Process identity for the activity registry (native/<os>/proc_<os>.cc):
// pidfdOpen(pid), pidfdSendSignal(fd, signal) on Linux (which reads the rest
// from /proc in TypeScript); processInfo(pid) -> {ppid, startTime, zombie} | null
// on macOS and Windows.
void InitProcess(Napi::Env env, Napi::Object exports);
// class LockWatcher(options, callback) {stop(), pump()}: the session lock
// (native/<os>/lock_<os>.cc; events in native/common/lock_event.h).
void InitSessionLock(Napi::Env env, Napi::Object exports);

#if defined(_WIN32)
// hasConsole(), consoleReadLine(options): the hidden prompt on the console
// (native/windows/console_windows.cc).
void InitConsole(Napi::Env env, Napi::Object exports);
#else
// unixConnect(path), socketSend(fd, buf), socketReceive(fd, buf, timeoutMs),
// socketPeerClosed(fd), closeFd(fd), isTerminal(fd): the blocking agent client
// of short-lived commands (native/common/sync_socket_posix.cc).
void InitSyncSocket(Napi::Env env, Napi::Object exports);
#endif

}  // namespace stash
