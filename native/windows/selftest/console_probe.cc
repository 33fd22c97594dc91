// A helper for test/cli/windows-prompt.test.ts, run under Wine in the console
// of the node.exe that prompts (a child shares its parent's console):
//   console_probe.exe mode        prints the input mode of CONIN$ ("mode=0x1f7")
//   console_probe.exe type TEXT   queues TEXT as key presses (WriteConsoleInputW),
//                                 as keys typed before a prompt are queued
// Under Wine, keys typed on the terminal reach the console only while a read
// is pending (Wine's conhost reads the tty then), so typing ahead on the pty
// cannot show FlushConsoleInputBuffer at work; queued records can.
#include <windows.h>

#include <cstdio>
#include <cwchar>
#include <vector>

int wmain(int argc, wchar_t** argv) {
  HANDLE in = CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                          OPEN_EXISTING, 0, nullptr);
  if (in == INVALID_HANDLE_VALUE) {
    std::printf("error=no-console\n");
    return 2;
  }
  if (argc == 2 && std::wcscmp(argv[1], L"mode") == 0) {
    DWORD mode = 0;
    if (!GetConsoleMode(in, &mode)) return 3;
    std::printf("mode=0x%lx\n", static_cast<unsigned long>(mode));
    return 0;
  }
  if (argc == 3 && std::wcscmp(argv[1], L"type") == 0) {
    std::vector<INPUT_RECORD> keys;
    for (const wchar_t* c = argv[2]; *c != L'\0'; c++) {
      for (BOOL down : {TRUE, FALSE}) {
        INPUT_RECORD r = {};
        r.EventType = KEY_EVENT;
        r.Event.KeyEvent.bKeyDown = down;
        r.Event.KeyEvent.wRepeatCount = 1;
        r.Event.KeyEvent.wVirtualKeyCode = *c == L'\r' ? VK_RETURN : static_cast<WORD>(VkKeyScanW(*c) & 0xff);
        r.Event.KeyEvent.uChar.UnicodeChar = *c;
        keys.push_back(r);
      }
    }
    DWORD written = 0;
    if (!WriteConsoleInputW(in, keys.data(), static_cast<DWORD>(keys.size()), &written)) return 4;
    std::printf("queued=%lu\n", static_cast<unsigned long>(written));
    return 0;
  }
  std::printf("usage: console_probe.exe mode | type TEXT\n");
  return 64;
}
