/**
 * dotenv files, read by the dotenv package's own parse() (motdotla/dotenv,
 * the parser `stash run --env-file` uses), so a file means here what it
 * means to the programs that load it:
 *
 * - `KEY=value` and `KEY: value`, with an optional `export ` before KEY;
 *   KEY is letters, digits, `_`, `.` and `-` (other names are mapped, names.ts);
 * - `#` starts a comment on its own line or after an unquoted value;
 * - a value in '...', "..." or `...` is taken as written, and may span
 *   lines; inside "...", `\n` and `\r` become a newline and a carriage
 *   return, and no other escape exists; an unquoted value is trimmed;
 * - line endings are \n or \r\n.
 *
 * dotenv skips a line it cannot read, and keeps only the last value of a key
 * given twice, without a word. An import must not drop a secret silently, so
 * the lines between the assignments are scanned with dotenv's own line
 * pattern: one that is neither blank nor a comment is an error naming its
 * line number (never its text), and so is a key assigned a second time.
 */
import { parse } from 'dotenv';
import { ImportError, type Collector } from './collector.js';

// dotenv's LINE pattern (lib/main.js), used only to learn where each
// assignment stands; the values come from parse() itself.
const LINE =
  /(?:^|^)\s*(?:export\s+)?([\w.-]+)(?:\s*=\s*?|:\s+?)(\s*'(?:\\'|[^'])*'|\s*"(?:\\"|[^"])*"|\s*`(?:\\`|[^`])*`|[^#\r\n]+)?\s*(?:#.*)?(?:$|$)/gm;

/** Line numbers from offsets: the offset of each line start, searched by halves. */
function lineCounter(text: string): (index: number) => number {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return (index) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= index) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}

/** The first line in `text[from, to)` that is neither blank nor a comment, or null. */
function strayLine(text: string, from: number, to: number, lineAt: (index: number) => number): number | null {
  let at = from;
  for (const line of text.slice(from, to).split('\n')) {
    const t = line.trim();
    if (t !== '' && !t.startsWith('#')) return lineAt(at + line.indexOf(t));
    at += line.length + 1;
  }
  return null;
}

/** Every assignment of a dotenv file into `sink`, `from` = `line N`. */
export function parseDotenv(bytes: Buffer, file: string, sink: Collector): void {
  // As dotenv does before matching; the string lives as long as this call.
  const text = bytes.toString('utf8').replace(/\r\n?/g, '\n');
  const lineAt = lineCounter(text);
  const lines = new Map<string, number>();
  let end = 0;
  LINE.lastIndex = 0;
  for (let m = LINE.exec(text); m !== null; m = LINE.exec(text)) {
    const stray = strayLine(text, end, m.index, lineAt);
    if (stray !== null)
      throw new ImportError(
        `${file} line ${stray}: not KEY=value (nothing was imported; a value over several lines must be quoted)`,
      );
    const line = lineAt(m.index + (m[0].length - m[0].trimStart().length));
    const first = lines.get(m[1]!);
    if (first !== undefined)
      throw new ImportError(
        `${file} line ${line}: ${m[1]} is assigned a second time (first on line ${first}), and dotenv keeps only the last value; remove one or rename it (nothing was imported)`,
      );
    lines.set(m[1]!, line);
    end = m.index + m[0].length;
  }
  const stray = strayLine(text, end, text.length, lineAt);
  if (stray !== null)
    throw new ImportError(
      `${file} line ${stray}: not KEY=value (nothing was imported; a value over several lines must be quoted)`,
    );
  const parsed = parse(bytes);
  for (const [key, value] of Object.entries(parsed)) {
    const line = lines.get(key);
    sink.add(key, line === undefined ? `key ${key}` : `line ${line}`, value);
    parsed[key] = '';
  }
}
