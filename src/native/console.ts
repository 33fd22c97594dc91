/**
 * The Windows console prompt (native/windows/console_windows.cc): arguments
 * checked here, before the native call; native failures keep their `code`.
 * Other platforms read /dev/tty from TypeScript (src/cli/prompt.ts), so their
 * addon has neither function.
 */
import { NativeError } from '../errors.js';
import { loadBinding, type NativeConsoleRead, type NativeConsoleReadOptions } from './binding.js';

export type { NativeConsoleRead, NativeConsoleReadOptions } from './binding.js';

/** Largest `into` the addon accepts: its wide line buffer is twice this, locked in memory. */
export const MAX_CONSOLE_LINE_BYTES = 1 << 20;

/** Longest prompt or notice, in UTF-16 units (a question, not a document). */
const MAX_TEXT = 4096;

/** Windows: true when this process has a console to ask on (CONIN$ opens as a console). */
export function hasConsole(): boolean {
  const probe = loadBinding().hasConsole;
  return typeof probe === 'function' ? probe() : false;
}

function checkText(value: unknown, what: string): void {
  if (typeof value !== 'string') throw new NativeError('EINVAL', `${what} must be a string`);
  if (value.length > MAX_TEXT) throw new NativeError('EINVAL', `${what} is longer than ${MAX_TEXT} characters`);
}

/**
 * Windows: asks `prompt` on the console and reads one line into `into` (UTF-8,
 * without the line end), with echo off unless `echo` is true. Resolves with
 * the byte count; rejects ENOTTY, ECANCELED (Ctrl-C, Ctrl-Break), EOF, E2BIG,
 * EILSEQ, EBUSY or WIN32_<n>. ENOTSUP on other platforms.
 */
export function consoleReadLine(options: NativeConsoleReadOptions): Promise<NativeConsoleRead> {
  if (typeof options !== 'object' || options === null)
    throw new NativeError('EINVAL', 'consoleReadLine needs an options object');
  checkText(options.prompt, 'prompt');
  checkText(options.discardedNotice, 'discardedNotice');
  if (!Buffer.isBuffer(options.into) || options.into.length === 0 || options.into.length > MAX_CONSOLE_LINE_BYTES) {
    throw new NativeError('EINVAL', `into must be a Buffer of 1 to ${MAX_CONSOLE_LINE_BYTES} bytes`);
  }
  if (typeof options.echo !== 'boolean' || typeof options.discardTypeAhead !== 'boolean') {
    throw new NativeError('EINVAL', 'echo and discardTypeAhead must be booleans');
  }
  const read = loadBinding().consoleReadLine;
  if (typeof read !== 'function')
    throw new NativeError(
      'ENOTSUP',
      'the console prompt is native on Windows only (elsewhere the prompt reads /dev/tty)',
    );
  return read(options);
}
