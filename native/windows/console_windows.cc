// The hidden prompt on Windows: one line read from the console with echo off,
// the counterpart of src/cli/prompt.ts reading /dev/tty in raw mode.
//
//   hasConsole() -> boolean
//   consoleReadLine({prompt, into, echo, discardTypeAhead, discardedNotice})
//     -> Promise<{length, discarded}>; the line's UTF-8 bytes are in into[0, length)
//
// CONIN$ and CONOUT$ are opened by name, not taken from stdin/stdout, so the
// prompt works while those are redirected (as /dev/tty does on Unix); a
// process without a console gets ENOTTY. The console stays in line mode
// (ENABLE_LINE_INPUT): conhost edits the line itself (Backspace, Esc clears
// it) and hands it over on Enter, so no keystroke passes through JavaScript.
// With ENABLE_ECHO_INPUT off conhost neither shows the line nor adds it to the
// command history (F7, Up): it adds a cooked read to the history only when echo
// is on (microsoft/terminal, readDataCooked.cpp, _handlePostCharInputLoop).
// ENABLE_PROCESSED_INPUT stays on, so Ctrl-C and Ctrl-Break raise a console
// control event, which our handler (registered last, so asked first) takes
// while a read is pending: conhost ends a pending cooked read on Ctrl-C
// (STATUS_ALERTED, ERROR_OPERATION_ABORTED in the caller), Wine 8 does not, so
// the handler also cancels the read with CancelIoEx until it returns. The read
// then fails with ECANCELED and the console mode is restored, on every path.
//
// The line is read into wide memory of our own (VirtualAlloc, VirtualLock:
// kept out of the page file as far as the working set allows), converted
// straight into the caller's buffer (a sodium secure buffer) and zeroed. What
// conhost keeps of the typed line in its own process is out of our reach.
// Errors name the call and the Windows error number, never the input.
#include <windows.h>
#include <napi.h>

#include <string>

#include "../common/errors.h"
#include "../common/platform.h"
#include "win_error.h"

namespace stash {
namespace {

// ---- the control handler ---------------------------------------------------

// The console control handler is per process, so one read at a time.
struct PendingRead {
  HANDLE input;
  HANDLE ctrl_seen;  // manual-reset event, set by the handler
  bool cancelled;
};
SRWLOCK g_lock = SRWLOCK_INIT;
PendingRead* g_read = nullptr;  // guarded by g_lock

// Runs on a thread the system starts for each event. Ctrl-C that arrives just
// before ReadConsoleW is entered has nothing to cancel yet, so the handler
// keeps cancelling (for at most ~5 s) until the reading thread has let go.
BOOL WINAPI OnConsoleControl(DWORD type) {
  if (type != CTRL_C_EVENT && type != CTRL_BREAK_EVENT) return FALSE;  // close/logoff: not ours
  for (int i = 0; i < 250; i++) {
    AcquireSRWLockExclusive(&g_lock);
    PendingRead* read = g_read;
    if (read != nullptr) {
      read->cancelled = true;
      SetEvent(read->ctrl_seen);
      CancelIoEx(read->input, nullptr);
    }
    ReleaseSRWLockExclusive(&g_lock);
    if (read == nullptr) return i > 0;  // no prompt at all: let Node's handler decide
    Sleep(20);
  }
  return TRUE;
}

// ---- one prompt --------------------------------------------------------------

struct Outcome {
  std::string code;  // empty: success
  std::string message;
  size_t length = 0;
  bool discarded = false;
};

void Fail(Outcome* out, const std::string& code, const std::string& message) {
  out->code = code;
  out->message = message;
}

void FailWin32(Outcome* out, const char* call, DWORD err) {
  Fail(out, Win32Code(err), Win32Text(call, err));
}

// Wide memory for the line: page-aligned, locked while it lives, zeroed before release.
class WideBuffer {
 public:
  explicit WideBuffer(size_t chars) : bytes_(chars * sizeof(wchar_t)) {
    data_ = static_cast<wchar_t*>(VirtualAlloc(nullptr, bytes_, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE));
    if (data_ != nullptr) locked_ = VirtualLock(data_, bytes_) != FALSE;  // best effort (working set quota)
  }
  ~WideBuffer() {
    if (data_ == nullptr) return;
    SecureZeroMemory(data_, bytes_);
    if (locked_) VirtualUnlock(data_, bytes_);
    VirtualFree(data_, 0, MEM_RELEASE);
  }
  WideBuffer(const WideBuffer&) = delete;
  WideBuffer& operator=(const WideBuffer&) = delete;
  wchar_t* data() const { return data_; }
  size_t chars() const { return bytes_ / sizeof(wchar_t); }
  void Wipe() { SecureZeroMemory(data_, bytes_); }

 private:
  size_t bytes_;
  wchar_t* data_ = nullptr;
  bool locked_ = false;
};

struct Request {
  std::wstring prompt;
  std::wstring notice;
  bool echo = false;
  bool discard_type_ahead = false;
  char* into = nullptr;
  size_t capacity = 0;
};

void WriteText(HANDLE out, const std::wstring& text) {
  DWORD written = 0;
  if (!text.empty()) WriteConsoleW(out, text.data(), static_cast<DWORD>(text.size()), &written, nullptr);
}

// True when a key was pressed (a key-down with a character) before the prompt
// showed. Key-ups, focus and mouse events are not typing: the key-up of the
// Enter that started this command is usually still queued.
bool TypedAhead(HANDLE input) {
  INPUT_RECORD records[128];
  DWORD count = 0;
  bool typed = false;
  if (PeekConsoleInputW(input, records, 128, &count)) {
    for (DWORD i = 0; i < count; i++) {
      const KEY_EVENT_RECORD& key = records[i].Event.KeyEvent;
      if (records[i].EventType == KEY_EVENT && key.bKeyDown && key.uChar.UnicodeChar != 0) typed = true;
    }
  }
  SecureZeroMemory(records, sizeof(records));
  return typed;
}

// Reads until a line feed or until `line` is full; returns the characters read,
// or -1 after recording the failure. A line longer than the buffer is read to
// its end and dropped, so its rest cannot answer a later question.
long ReadLine(HANDLE input, PendingRead* pending, WideBuffer& line, Outcome* out) {
  size_t used = 0;
  bool overflow = false;
  for (;;) {
    if (used == line.chars()) {
      overflow = true;
      line.Wipe();
      used = 0;
    }
    DWORD got = 0;
    SetLastError(ERROR_SUCCESS);
    BOOL ok = ReadConsoleW(input, line.data() + used, static_cast<DWORD>(line.chars() - used), &got, nullptr);
    DWORD err = GetLastError();
    if ((!ok || got == 0) && err == ERROR_OPERATION_ABORTED) {
      // Windows ends the read before the handler's thread has run: wait for it.
      WaitForSingleObject(pending->ctrl_seen, 250);
    }
    AcquireSRWLockShared(&g_lock);
    bool cancelled = pending->cancelled;
    ReleaseSRWLockShared(&g_lock);
    if (cancelled || ((!ok || got == 0) && err == ERROR_OPERATION_ABORTED)) {
      Fail(out, "ECANCELED", "cancelled");
      return -1;
    }
    if (!ok) {
      FailWin32(out, "ReadConsoleW", err);
      return -1;
    }
    if (got == 0) {
      Fail(out, "EOF", "the console input ended");
      return -1;
    }
    size_t start = used;
    used += got;
    for (size_t i = start; i < used; i++) {
      if (line.data()[i] != L'\n') continue;
      if (overflow) {
        Fail(out, "E2BIG", "the line is longer than the buffer");
        return -1;
      }
      size_t end = i;
      if (end > 0 && line.data()[end - 1] == L'\r') end--;
      return static_cast<long>(end);
    }
  }
}

// UTF-16 to UTF-8 straight into the caller's buffer. WC_ERR_INVALID_CHARS: a
// lone surrogate is refused rather than replaced by U+FFFD, which would make
// two different inputs the same password.
void Convert(const wchar_t* text, long chars, const Request& req, Outcome* out) {
  if (chars == 0) return;
  int n = WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, text, static_cast<int>(chars), req.into,
                              static_cast<int>(req.capacity), nullptr, nullptr);
  if (n > 0) {
    out->length = static_cast<size_t>(n);
    return;
  }
  DWORD err = GetLastError();
  SecureZeroMemory(req.into, req.capacity);
  if (err == ERROR_INSUFFICIENT_BUFFER) Fail(out, "E2BIG", "the line is longer than the buffer");
  else if (err == ERROR_NO_UNICODE_TRANSLATION) Fail(out, "EILSEQ", "the line is not valid UTF-16 (a lone surrogate)");
  else FailWin32(out, "WideCharToMultiByte", err);
}

// With the console open and the prompt claimed: the handler, the mode, the
// question and the read. The mode is restored on every path once it was set.
void Ask(const Request& req, HANDLE input, HANDLE output, PendingRead* pending, Outcome* out) {
  DWORD saved = 0;
  if (!GetConsoleMode(input, &saved)) {
    Fail(out, "ENOTTY", "CONIN$ is not a console input buffer (GetConsoleMode failed)");
    return;
  }
  if (!SetConsoleCtrlHandler(OnConsoleControl, TRUE)) {
    FailWin32(out, "SetConsoleCtrlHandler", GetLastError());
    return;
  }
  // Echo goes off before the question appears (as on Unix): an answer typed
  // the moment it shows must never be echoed. ENABLE_ECHO_INPUT is only
  // valid together with ENABLE_LINE_INPUT.
  DWORD mode = saved | ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT;
  mode = req.echo ? (mode | ENABLE_ECHO_INPUT) : (mode & ~static_cast<DWORD>(ENABLE_ECHO_INPUT));
  if (!SetConsoleMode(input, mode)) {
    FailWin32(out, "SetConsoleMode", GetLastError());
  } else {
    // What was typed before the question (shown, since echo was on) is
    // dropped, as readpassphrase's TCSAFLUSH does on Unix.
    if (req.discard_type_ahead) {
      out->discarded = TypedAhead(input);
      FlushConsoleInputBuffer(input);
      if (out->discarded) WriteText(output, req.notice);
    }
    WriteText(output, req.prompt);
    // One more than the caller's capacity, plus CR LF: a line of capacity+1
    // characters is then seen (and refused) instead of cut, since conhost
    // ignores keys typed once its buffer is full.
    WideBuffer line(req.capacity + 3);
    if (line.data() == nullptr) {
      FailWin32(out, "VirtualAlloc", GetLastError());
    } else {
      long chars = ReadLine(input, pending, line, out);
      if (chars >= 0) Convert(line.data(), chars, req, out);
    }
    if (!req.echo) WriteText(output, L"\r\n");  // the Enter was not echoed either
    SetConsoleMode(input, saved);
  }
  SetConsoleCtrlHandler(OnConsoleControl, FALSE);
}

void Prompt(const Request& req, Outcome* out) {
  HANDLE input = CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                             OPEN_EXISTING, 0, nullptr);
  if (input == INVALID_HANDLE_VALUE) {
    Fail(out, "ENOTTY", "this process has no console (" + Win32Text("CreateFileW(CONIN$)", GetLastError()) + ")");
    return;
  }
  HANDLE output = CreateFileW(L"CONOUT$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                              OPEN_EXISTING, 0, nullptr);
  PendingRead pending{input, CreateEventW(nullptr, TRUE, FALSE, nullptr), false};
  if (output == INVALID_HANDLE_VALUE) {
    Fail(out, "ENOTTY", "this process has no console screen buffer (CreateFileW(CONOUT$) failed)");
  } else if (pending.ctrl_seen == nullptr) {
    FailWin32(out, "CreateEventW", GetLastError());
  } else {
    AcquireSRWLockExclusive(&g_lock);
    bool claimed = g_read == nullptr;
    if (claimed) g_read = &pending;
    ReleaseSRWLockExclusive(&g_lock);
    if (!claimed) {
      Fail(out, "EBUSY", "another console prompt is in progress");
    } else {
      Ask(req, input, output, &pending, out);
      // After this the handler no longer touches `input`, so it can be closed.
      AcquireSRWLockExclusive(&g_lock);
      g_read = nullptr;
      ReleaseSRWLockExclusive(&g_lock);
    }
  }
  if (pending.ctrl_seen != nullptr) CloseHandle(pending.ctrl_seen);
  if (output != INVALID_HANDLE_VALUE) CloseHandle(output);
  CloseHandle(input);
}

// ---- N-API -------------------------------------------------------------------

class ReadWorker : public Napi::AsyncWorker {
 public:
  ReadWorker(Napi::Env env, Request req, Napi::Object keep)
      : Napi::AsyncWorker(env, "stash.consoleReadLine"), deferred_(Napi::Promise::Deferred::New(env)), req_(std::move(req)) {
    keep_ = Napi::Persistent(keep);  // `into` stays alive (and in place) while the worker writes to it
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    Prompt(req_, &out_);
    if (!out_.code.empty()) SetError(out_.message);
  }
  void OnOK() override {
    Napi::Object result = Napi::Object::New(Env());
    result.Set("length", Napi::Number::New(Env(), static_cast<double>(out_.length)));
    result.Set("discarded", Napi::Boolean::New(Env(), out_.discarded));
    deferred_.Resolve(result);
  }
  void OnError(const Napi::Error&) override {
    Napi::Error error = Napi::Error::New(Env(), out_.message);
    error.Set("code", Napi::String::New(Env(), out_.code));
    deferred_.Reject(error.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference keep_;
  Request req_;
  Outcome out_;
};

Napi::Value ConsoleReadLine(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "consoleReadLine({prompt, into, echo, discardTypeAhead, discardedNotice})";
  if (!info[0].IsObject()) ThrowCode(env, "EINVAL", usage);
  Napi::Object options = info[0].As<Napi::Object>();
  Napi::Value prompt = options.Get("prompt");
  Napi::Value notice = options.Get("discardedNotice");
  Napi::Value into = options.Get("into");
  if (!prompt.IsString() || !notice.IsString() || !into.IsBuffer()) ThrowCode(env, "EINVAL", usage);
  Napi::Buffer<char> buffer = into.As<Napi::Buffer<char>>();
  if (buffer.Length() == 0 || buffer.Length() > (1u << 20)) ThrowCode(env, "EINVAL", "into must hold 1 byte to 1 MiB");
  Request req;
  req.prompt = Widen(prompt.As<Napi::String>().Utf8Value());
  req.notice = Widen(notice.As<Napi::String>().Utf8Value());
  req.echo = options.Get("echo").ToBoolean().Value();
  req.discard_type_ahead = options.Get("discardTypeAhead").ToBoolean().Value();
  req.into = buffer.Data();
  req.capacity = buffer.Length();
  auto* worker = new ReadWorker(env, std::move(req), buffer);
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// Whether CONIN$ opens and is a console input buffer: haveTerminal() on win32.
Napi::Value HasConsole(const Napi::CallbackInfo& info) {
  HANDLE input = CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                             OPEN_EXISTING, 0, nullptr);
  if (input == INVALID_HANDLE_VALUE) return Napi::Boolean::New(info.Env(), false);
  DWORD mode = 0;
  bool console = GetConsoleMode(input, &mode) != FALSE;
  CloseHandle(input);
  return Napi::Boolean::New(info.Env(), console);
}

}  // namespace

void InitConsole(Napi::Env env, Napi::Object exports) {
  exports.Set("hasConsole", Napi::Function::New(env, HasConsole, "hasConsole"));
  exports.Set("consoleReadLine", Napi::Function::New(env, ConsoleReadLine, "consoleReadLine"));
}

}  // namespace stash
