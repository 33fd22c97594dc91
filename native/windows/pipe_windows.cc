// Node on top of the agent's named pipe (the Win32 part and its design are in
// pipe_core_windows.cc; the JS shape in pipe_windows.h).
//
// Why native: Node's net.Server listens on a pipe through libuv, whose
// uv_pipe_bind calls CreateNamedPipeW with a NULL SECURITY_ATTRIBUTES (the
// default pipe DACL: full control for SYSTEM, Administrators and the creator
// owner, read access for Everyone and ANONYMOUS LOGON), and Node never exposes
// the instance HANDLE that GetNamedPipeClientProcessId needs. So the addon
// creates and accepts the instances itself (PipeAcceptor, on a thread of its
// own) and hands each accepted, checked connection to Node as a CRT file
// descriptor: uv_open_osfhandle lives in node.exe, so the descriptor is in
// Node's CRT table, not this addon's, and JS wraps it with
// new net.Socket({fd}) (uv_pipe_open). pipeConnect does the same for the
// client end, on the libuv thread pool.
//
// uv_open_osfhandle is looked up in the host executable at run time instead of
// being linked: the addon then imports N-API symbols only, so the import
// library that cmake-js makes from node-api-headers' node_api.def (MSVC) or
// that the release makes with dlltool (mingw-w64) is enough, and no uv.h is
// needed to build.
#include <windows.h>
#include <napi.h>

#include <memory>
#include <string>
#include <thread>

#include "../common/errors.h"
#include "pipe_core_windows.h"
#include "pipe_windows.h"
#include "win_error.h"

namespace stash {
namespace {

// int uv_open_osfhandle(uv_os_fd_t) with uv_os_fd_t = HANDLE on Windows (libuv's uv/win.h).
using OpenOsfHandle = int (*)(HANDLE);

// Returns -1 when the host executable does not export it (not node.exe).
int OpenCrtDescriptor(HANDLE pipe) {
  static const OpenOsfHandle open_osfhandle = reinterpret_cast<OpenOsfHandle>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(nullptr), "uv_open_osfhandle")));
  return open_osfhandle == nullptr ? -1 : open_osfhandle(pipe);
}

// ---- the server ------------------------------------------------------------

Napi::Object PipeEventObject(Napi::Env env, PipeAccept* ev) {
  Napi::Object o = Napi::Object::New(env);
  if (ev->kind == PipeAccept::kConnection) {
    int fd = OpenCrtDescriptor(ev->pipe);
    if (fd >= 0) {
      ev->pipe = INVALID_HANDLE_VALUE;
      o.Set("type", "connection");
      o.Set("fd", Napi::Number::New(env, fd));
      o.Set("pid", Napi::Number::New(env, ev->pid));
      return o;
    }
    ev->kind = PipeAccept::kRefused;
    ev->message = "no CRT descriptor for the connection (uv_open_osfhandle failed or is not exported by the host)";
  }
  if (ev->kind == PipeAccept::kRefused) {
    o.Set("type", "refused");
    o.Set("pid", Napi::Number::New(env, ev->pid));
    o.Set("reason", ev->message);
    return o;
  }
  o.Set("type", "error");
  o.Set("code", Win32Code(ev->error));
  o.Set("message", ev->message);
  return o;
}

void DeliverPipeEvent(Napi::Env env, Napi::Function callback, std::nullptr_t*, PipeAccept* raw) {
  std::unique_ptr<PipeAccept> ev(raw);
  // No C++ exception may unwind into libuv (that aborts node); a callback that
  // threw goes back to node as an uncaught exception.
  try {
    if (env != nullptr && callback != nullptr) callback.Call({PipeEventObject(env, ev.get())});
  } catch (const Napi::Error& e) {
    try {
      e.ThrowAsJavaScriptException();
    } catch (...) {
    }
  } catch (...) {
  }
  // Not handed to JS (environment torn down, or no descriptor): close it here.
  if (ev->pipe != INVALID_HANDLE_VALUE) CloseHandle(ev->pipe);
}

using PipeFn = Napi::TypedThreadSafeFunction<std::nullptr_t, PipeAccept, DeliverPipeEvent>;

class PipeServer : public Napi::ObjectWrap<PipeServer> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "PipeServer", {InstanceMethod<&PipeServer::Close>("close")});
  }

  explicit PipeServer(const Napi::CallbackInfo& info) : Napi::ObjectWrap<PipeServer>(info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString() || !info[1].IsFunction()) ThrowCode(env, "EINVAL", "PipeServer(name, callback)");
    std::string name = info[0].As<Napi::String>().Utf8Value();
    acceptor_ = std::make_unique<PipeAcceptor>();
    DWORD err = acceptor_->Open(Widen(name));
    if (err == ERROR_ACCESS_DENIED || err == ERROR_PIPE_BUSY) {
      // FIRST_PIPE_INSTANCE's answer when the name exists.
      ThrowCode(env, "EADDRINUSE", name + " already exists (another agent, or a process that claimed the name first)");
    }
    if (err != ERROR_SUCCESS) ThrowWin32(env, "CreateNamedPipe (owner-only DACL)", err);
    // Ref'd, like a listening net.Server: it keeps node alive until close().
    tsfn_ = PipeFn::New(env, info[1].As<Napi::Function>(), "stash.PipeServer", 0, 1);
    running_ = true;
    thread_ = std::thread(&PipeServer::AcceptLoop, this);
    hook_ = env.AddCleanupHook(&PipeServer::OnEnvCleanup, this);
  }

  ~PipeServer() override { Shutdown(false); }

 private:
  static void OnEnvCleanup(PipeServer* self) { self->Shutdown(true); }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    Shutdown(false);
    return info.Env().Undefined();
  }

  void Shutdown(bool from_cleanup_hook) {
    if (!running_) return;
    running_ = false;
    acceptor_->Stop();
    if (thread_.joinable()) thread_.join();
    acceptor_.reset();  // closes the waiting instance: the name goes with the last one
    tsfn_.Release();
    if (!from_cleanup_hook && !hook_.IsEmpty()) hook_.Remove(Env());
  }

  // Runs on its own thread until Stop() or an error.
  void AcceptLoop() {
    for (;;) {
      auto* ev = new PipeAccept(acceptor_->Next());
      PipeAccept::Kind kind = ev->kind;
      if (kind == PipeAccept::kStopped) {
        delete ev;
        return;
      }
      if (tsfn_.NonBlockingCall(ev) != napi_ok) {
        if (ev->pipe != INVALID_HANDLE_VALUE) CloseHandle(ev->pipe);
        delete ev;
      }
      if (kind == PipeAccept::kError) return;
    }
  }

  std::unique_ptr<PipeAcceptor> acceptor_;
  PipeFn tsfn_;
  std::thread thread_;
  Napi::Env::CleanupHook<void (*)(PipeServer*), PipeServer> hook_;
  bool running_ = false;
};

// ---- the client ------------------------------------------------------------

class ConnectWorker : public Napi::AsyncWorker {
 public:
  ConnectWorker(Napi::Env env, std::string name, DWORD timeout_ms)
      : Napi::AsyncWorker(env, "stash.pipeConnect"),
        deferred_(Napi::Promise::Deferred::New(env)),
        name_(std::move(name)),
        timeout_ms_(timeout_ms) {}

  ~ConnectWorker() override {
    if (result_.pipe != INVALID_HANDLE_VALUE) CloseHandle(result_.pipe);
  }

  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    result_ = ConnectVerified(name_, Widen(name_), timeout_ms_);
    if (!result_.code.empty()) SetError(result_.message);
  }

  void OnOK() override {
    Napi::Env env = Env();
    int fd = OpenCrtDescriptor(result_.pipe);
    if (fd < 0) {
      result_.code = "EBADF";
      result_.message = "no CRT descriptor for the pipe (uv_open_osfhandle failed or is not exported by the host)";
      return OnError(Napi::Error::New(env, result_.message));
    }
    result_.pipe = INVALID_HANDLE_VALUE;  // the descriptor owns it now
    Napi::Object out = Napi::Object::New(env);
    out.Set("fd", Napi::Number::New(env, fd));
    out.Set("pid", Napi::Number::New(env, result_.pid));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override {
    Napi::Error error = Napi::Error::New(Env(), result_.message.empty() ? e.Message() : result_.message);
    error.Set("code", Napi::String::New(Env(), result_.code.empty() ? std::string("EIO") : result_.code));
    deferred_.Reject(error.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string name_;
  DWORD timeout_ms_;
  PipeConnect result_;
};

Napi::Value PipeConnectCall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString() || !info[1].IsNumber()) ThrowCode(env, "EINVAL", "pipeConnect(name, timeoutMs)");
  auto* worker = new ConnectWorker(env, info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::Number>().Uint32Value());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace

void InitPipe(Napi::Env env, Napi::Object exports) {
  exports.Set("PipeServer", PipeServer::Define(env));
  exports.Set("pipeConnect", Napi::Function::New(env, PipeConnectCall, "pipeConnect"));
}

}  // namespace stash
