/**
 * Terminal output: colour only on a terminal and never with NO_COLOR (any
 * non-empty value, as https://no-color.org asks), check marks, JSON, tables,
 * durations, and the one warning format.
 */
import type { WriteStream } from 'node:tty';
import { writeText } from '../output-streams.js';

type Stream = NodeJS.WriteStream | WriteStream;

/** True when `stream` may carry ANSI colour. */
export function colorEnabled(stream: Stream = process.stdout, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

const CODES = { red: 31, green: 32, yellow: 33, bold: 1, dim: 2 } as const;
export type Style = keyof typeof CODES;

/** `text` in a style when colour is enabled on `stream`, else unchanged. */
export function paint(style: Style, text: string, stream: Stream = process.stdout): string {
  return colorEnabled(stream) ? `\x1b[${CODES[style]}m${text}\x1b[0m` : text;
}

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'info';

/** A fixed-width mark for a check line; readable without colour. */
export function mark(status: CheckStatus, stream: Stream = process.stdout): string {
  switch (status) {
    case 'ok':
      return paint('green', '[ ok ]', stream);
    case 'warn':
      return paint('yellow', '[warn]', stream);
    case 'fail':
      return paint('red', '[FAIL]', stream);
    case 'info':
      return paint('dim', '[info]', stream);
  }
}

/** Writes one line to stdout. */
export function out(line = ''): void {
  writeText('stdout', `${line}\n`);
}

/** Pretty JSON on stdout. */
export function outJson(value: unknown): void {
  writeText('stdout', `${JSON.stringify(value, null, 2)}\n`);
}

/** `stash: warning: ...` on stderr. */
export function warn(message: string): void {
  writeText('stderr', `stash: warning: ${message}\n`);
}

/** A notice for people on stderr (keeps stdout clean for data). */
export function note(message: string): void {
  writeText('stderr', `${message}\n`);
}

/**
 * Text from elsewhere (a key server's message, a URL from its topology) made
 * safe for a terminal: control characters other than newline and tab, and
 * invisible format characters (bidi overrides), become U+FFFD, so a hostile
 * server cannot move the cursor or recolour what the user reads.
 */
export function terminalSafe(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\p{Cf}\u2028\u2029]/gu, '\ufffd');
}

/** "14m 05s", "2h 00m", "3s". */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m ${String(s).padStart(2, '0')}s`;
  return `${s}s`;
}

/** Left-aligned columns; the last column is not padded. */
export function formatTable(header: string[], rows: string[][]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

/** An octal file mode, "0700". */
export function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/** "256 MiB", "8 KiB". */
export function formatBytes(n: number): string {
  if (n >= 1048576) return `${Math.round(n / 1048576)} MiB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KiB`;
  return `${n} bytes`;
}
