/**
 * JSON imports: a flat object of names to strings, the form
 * `stash env --format json` prints (`{"API_TOKEN": "..."}`). Anything else
 * (a number, a nested object, an array) is an error naming the field, and so
 * is a key given twice (readJson; also for Bitwarden's JSON).
 */
import { ImportError, type Collector } from './collector.js';

/**
 * JSON.parse, with its errors reworded: V8's messages can quote a stretch of
 * the input ("...", "secret" is not valid JSON), so only a line and column
 * (when V8 gives a position) reach the user. A key given twice in one object,
 * at any depth, is refused too: JSON.parse keeps the last value without a
 * word, and an import must not lose a secret silently.
 */
export function readJson(bytes: Buffer, file: string): unknown {
  const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    const at = /at position (\d+)/.exec((err as Error).message);
    if (at === null) throw new ImportError(`${file}: not valid JSON`);
    throw new ImportError(`${file} ${lineColumn(text, Number(at[1]))}: not valid JSON`);
  }
  const dup = duplicateKey(text);
  if (dup !== null)
    throw new ImportError(
      `${file} ${lineColumn(text, dup.at)}: the key ${JSON.stringify(dup.key)} is given a second time in one object (first at ${lineColumn(text, dup.first)}), and JSON keeps only the last value; remove one or rename it (nothing was imported)`,
    );
  return doc;
}

/** `line L, column C` of an offset into `text` (both from 1). */
function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset);
  return `line ${before.split('\n').length}, column ${before.length - before.lastIndexOf('\n')}`;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The first key that an object of `text` (valid JSON: JSON.parse has read it)
 * holds twice, at any depth, with the offsets of its first and second occurrence; null
 * when there is none. A reviver cannot tell: JSON.parse has merged the two
 * before it runs. Keys are compared decoded (`"A"` and `"\u0041"` are one
 * key); values are stepped over, never copied.
 */
export function duplicateKey(text: string): { key: string; first: number; at: number } | null {
  // One frame per open object (its keys so far, with where each stands) or array (null).
  const stack: Array<Map<string, number> | null> = [];
  let keyNext = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const start = i;
      for (i++; text.charCodeAt(i) !== QUOTE; i++) if (text.charCodeAt(i) === BACKSLASH) i++;
      const keys = stack[stack.length - 1];
      if (keyNext && keys) {
        const key = JSON.parse(text.slice(start, i + 1)) as string;
        const first = keys.get(key);
        if (first !== undefined) return { key, first, at: start };
        keys.set(key, start);
        keyNext = false;
      }
    } else if (c === '{') {
      stack.push(new Map());
      keyNext = true;
    } else if (c === '[') {
      stack.push(null);
      keyNext = false;
    } else if (c === '}' || c === ']') {
      stack.pop();
      keyNext = false;
    } else if (c === ',') {
      keyNext = stack[stack.length - 1] instanceof Map;
    }
  }
  return null;
}

/** What a JSON value is, for messages ("a number"); never the value. */
export function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

export function parseJsonObject(bytes: Buffer, file: string, sink: Collector): void {
  const doc = readJson(bytes, file);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new ImportError(
      `${file}: the JSON is ${kindOf(doc)}; json imports one flat object of names to strings, as stash env --format json prints`,
    );
  }
  const fields = doc as Record<string, unknown>;
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value !== 'string')
      throw new ImportError(
        `${file}: field ${JSON.stringify(name)} is ${kindOf(value)}, not a string (nothing was imported)`,
      );
  }
  for (const name of Object.keys(fields)) {
    sink.add(name, `field ${JSON.stringify(name)}`, fields[name] as string);
    fields[name] = '';
  }
}
