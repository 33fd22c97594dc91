// A blocking Unix-socket client for short-lived commands (Linux and macOS).
//
// `stash get` asks the agent one question and exits. Through node:net that
// costs loading net, stream and their helpers and a trip through libuv for
// each reply; these calls do the same with plain system calls on the JS
// thread: connect, send everything, wait (poll, bounded by a timeout) for
// bytes, receive. Only ciphertext of the sealed channel, or plain status
// frames, pass through here: no key is ever in these buffers in the clear.
// Used by src/agent/transport-blocking.ts; the agent itself never uses them.
#include <napi.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "errors.h"
#include "platform.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0  // macOS: SO_NOSIGPIPE is set on the socket instead
#endif

namespace stash {
namespace {

int64_t MonotonicMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int FdArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsNumber()) ThrowCode(info.Env(), "EINVAL", "expected a file descriptor");
  int fd = info[i].As<Napi::Number>().Int32Value();
  if (fd < 0) ThrowCode(info.Env(), "EBADF", "negative file descriptor");
  return fd;
}

Napi::Buffer<uint8_t> BufferArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsBuffer()) ThrowCode(info.Env(), "EINVAL", "expected a Buffer");
  return info[i].As<Napi::Buffer<uint8_t>>();
}

// Waits until `fd` has one of `events` or `deadline` (monotonic ms; -1 = none) passes.
// Returns the revents, or 0 on timeout. EINTR (a signal for Node's handler) resumes the wait.
short WaitFor(Napi::Env env, int fd, short events, int64_t deadline) {
  for (;;) {
    int timeout = -1;
    if (deadline >= 0) {
      int64_t left = deadline - MonotonicMs();
      timeout = left > 0 ? int(left) : 0;
    }
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, timeout);
    if (r > 0) return p.revents;
    if (r == 0) return 0;
    if (errno != EINTR) ThrowErrno(env, "poll", errno);
  }
}

// unixConnect(path) -> fd: a connected, blocking, close-on-exec stream socket.
Napi::Value UnixConnect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) ThrowCode(env, "EINVAL", "expected a socket path");
  std::string path = info[0].As<Napi::String>().Utf8Value();
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path || path.find('\0') != std::string::npos) {
    ThrowCode(env, "ENAMETOOLONG", "socket path is empty, holds a NUL byte or is longer than " +
                                       std::to_string(sizeof addr.sun_path - 1) + " bytes: " + path);
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) ThrowErrno(env, "socket", errno);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
#ifdef SO_NOSIGPIPE
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    if (err == EINTR || err == EINPROGRESS) {
      // The connection goes on in the background: wait for it, then read its outcome.
      if (WaitFor(env, fd, POLLOUT, MonotonicMs() + 2000) == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err != 0) {
      close(fd);
      ThrowErrno(env, "connect", err);
    }
  }
  return Napi::Number::New(env, fd);
}

// socketSend(fd, buffer): writes every byte, or throws (EPIPE, ECONNRESET: the agent went away).
Napi::Value SocketSend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = FdArg(info, 0);
  Napi::Buffer<uint8_t> buf = BufferArg(info, 1);
  const uint8_t* data = buf.Data();
  size_t left = buf.Length();
  while (left > 0) {
    ssize_t n = send(fd, data, left, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      left -= size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      WaitFor(env, fd, POLLOUT, -1);
    } else {
      ThrowErrno(env, "send", n < 0 ? errno : EIO);
    }
  }
  return env.Undefined();
}

// socketReceive(fd, buffer, timeoutMs) -> bytes read into buffer; 0 when the peer closed.
// Throws ETIMEDOUT when nothing arrives within timeoutMs.
Napi::Value SocketReceive(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = FdArg(info, 0);
  Napi::Buffer<uint8_t> buf = BufferArg(info, 1);
  if (info.Length() < 3 || !info[2].IsNumber()) ThrowCode(env, "EINVAL", "expected a timeout in milliseconds");
  int64_t timeout = info[2].As<Napi::Number>().Int64Value();
  int64_t deadline = timeout < 0 ? -1 : MonotonicMs() + timeout;
  if (buf.Length() == 0) ThrowCode(env, "EINVAL", "empty receive buffer");
  for (;;) {
    if (WaitFor(env, fd, POLLIN, deadline) == 0) {
      ThrowCode(env, "ETIMEDOUT", "no reply within " + std::to_string(timeout) + " ms");
    }
    ssize_t n = recv(fd, buf.Data(), buf.Length(), 0);
    if (n >= 0) return Napi::Number::New(env, double(n));
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    ThrowErrno(env, "recv", errno);
  }
}

// socketPeerClosed(fd) -> true when the other end has closed (or reset) the connection,
// without waiting and without consuming a byte.
Napi::Value SocketPeerClosed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = FdArg(info, 0);
  short revents = WaitFor(env, fd, POLLIN, 0);
  if (revents == 0) return Napi::Boolean::New(env, false);
  if (revents & (POLLERR | POLLNVAL)) return Napi::Boolean::New(env, true);
  uint8_t byte;
  ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return Napi::Boolean::New(env, true);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Napi::Boolean::New(env, true);
  return Napi::Boolean::New(env, false);
}

Napi::Value CloseFd(const Napi::CallbackInfo& info) {
  int fd = FdArg(info, 0);
  // After close(2) the descriptor is gone even on EINTR (Linux, macOS): never retry.
  close(fd);
  return info.Env().Undefined();
}

// isTerminal(fd): isatty(3), without creating process.stdout (which loads tty, net and stream).
Napi::Value IsTerminal(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), isatty(FdArg(info, 0)) == 1);
}

}  // namespace

void InitSyncSocket(Napi::Env env, Napi::Object exports) {
  exports.Set("unixConnect", Napi::Function::New(env, UnixConnect, "unixConnect"));
  exports.Set("socketSend", Napi::Function::New(env, SocketSend, "socketSend"));
  exports.Set("socketReceive", Napi::Function::New(env, SocketReceive, "socketReceive"));
  exports.Set("socketPeerClosed", Napi::Function::New(env, SocketPeerClosed, "socketPeerClosed"));
  exports.Set("closeFd", Napi::Function::New(env, CloseFd, "closeFd"));
  exports.Set("isTerminal", Napi::Function::New(env, IsTerminal, "isTerminal"));
}

}  // namespace stash
