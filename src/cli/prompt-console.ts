/**
 * Prompts on the Windows console, the win32 half of prompt.ts. The addon reads
 * one line from CONIN$ in line mode (native/windows/console_windows.cc), so
 * the keys never pass through JavaScript: the hidden line arrives as UTF-8 in
 * a sodium secure buffer, which is copied to one of exact length and zeroed.
 * The rules are the Unix ones: what was typed before the question is
 * discarded (and said so), Ctrl-C (or Ctrl-Break) cancels, end of input
 * (Ctrl-Z then Enter, at the start of the line) on an empty line cancels,
 * and a line longer than the limit is refused.
 */
import { StashError } from '../errors.js';
import { consoleReadLine, hasConsole } from '../native/console.js';
import { secureAlloc, wipe } from '../vault/secure.js';

/** Written before the question when keys typed earlier were dropped (the same words as on Unix). */
export const DISCARDED_NOTICE =
  '(what was typed before this prompt was shown on the screen and has been discarded)\r\n';

/** Ctrl-Z: what the console hands over for end of input, as Ctrl-D on a Unix terminal. */
const CTRL_Z = 0x1a;

/** True when the process has a console to ask on (false too when the addon cannot load). */
export function haveConsole(): boolean {
  try {
    return hasConsole();
  } catch {
    return false;
  }
}

/** The addon's error codes as the CLI's errors; nothing of the input is in either message. */
function translate(err: unknown, maxBytes: number): Error {
  const code = (err as { code?: unknown }).code;
  switch (code) {
    case 'ECANCELED':
      return new StashError('INTERRUPTED', 'cancelled');
    case 'EOF':
      return new StashError('INTERRUPTED', 'cancelled (end of input)');
    case 'E2BIG':
      return new StashError('INPUT_TOO_LARGE', `the input is longer than ${maxBytes} bytes`);
    case 'ENOTTY':
      return new StashError('NO_TERMINAL', 'no terminal to ask on');
    case 'EILSEQ':
      return new StashError('INPUT_ERROR', 'the input is not valid Unicode text');
    default:
      return new StashError('INPUT_ERROR', `cannot read from the console: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The Unix rule for Ctrl-D, applied to the Ctrl-Z the console hands over: at
 * the start of the line it cancels (INTERRUPTED), after text it ends the line
 * there. Returns the length of the line that counts.
 */
export function endOfInput(line: Buffer, length: number): number {
  const eof = line.subarray(0, length).indexOf(CTRL_Z);
  if (eof === 0) throw new StashError('INTERRUPTED', 'cancelled (end of input)');
  return eof > 0 ? eof : length;
}

/**
 * Reads one line into a secure buffer of `maxBytes`; returns its length after
 * the end-of-input rule. The caller wipes `buf` in every case.
 */
async function readInto(buf: Buffer, question: string, echo: boolean): Promise<number> {
  let length: number;
  try {
    ({ length } = await consoleReadLine({
      prompt: question,
      into: buf,
      echo,
      discardTypeAhead: !echo,
      discardedNotice: DISCARDED_NOTICE,
    }));
  } catch (err) {
    throw translate(err, buf.length);
  }
  return endOfInput(buf, length);
}

/** promptHidden on the console: a secure buffer of exact length (release it with wipe()). */
export async function promptHiddenConsole(question: string, maxBytes: number): Promise<Buffer> {
  const buf = secureAlloc(maxBytes);
  try {
    const length = await readInto(buf, question, false);
    const out = secureAlloc(length);
    buf.copy(out, 0, 0, length);
    return out;
  } finally {
    wipe(buf);
  }
}

/** askLine on the console (echo on); null when there is no console. Ctrl-C cancels, as SIGINT does on Unix. */
export async function askLineConsole(question: string, maxBytes = 4096): Promise<string | null> {
  const buf = Buffer.alloc(maxBytes);
  try {
    const length = await readInto(buf, question, true);
    return buf.toString('utf8', 0, length).trim();
  } catch (err) {
    if ((err as StashError).code === 'INTERRUPTED') throw err;
    return null;
  }
}
