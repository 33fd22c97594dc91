/**
 * isatty() of stdin, stdout or stderr without making Node's stream:
 * process.stdout.isTTY would make it, and a pipe's loads node:net, node:tty
 * and the stream machinery (a few milliseconds of every command; the text
 * itself goes straight to the descriptor, output-streams.ts). Asked through
 * the addon (POSIX; every command that reads or writes a value loads it for
 * the agent anyway); without it, or on Windows, the stream says.
 */
import { loadBinding } from '../native/binding.js';

export function isTerminal(fd: 0 | 1 | 2): boolean {
  try {
    const isatty = loadBinding().isTerminal;
    if (isatty) return isatty(fd);
  } catch {
    /* no addon: ask the stream */
  }
  return (fd === 0 ? process.stdin : fd === 1 ? process.stdout : process.stderr).isTTY === true;
}
