/**
 * JSON imports: a flat object of names to strings, the form
 * `stash env --format json` prints (`{"API_TOKEN": "..."}`). Anything else
 * (a number, a nested object, an array) is an error naming the field.
 */
import { ImportError, type Collector } from './collector.js';

/**
 * JSON.parse, with its errors reworded: V8's messages can quote a stretch of
 * the input ("...", "secret" is not valid JSON), so only a line and column
 * (when V8 gives a position) reach the user.
 */
export function readJson(bytes: Buffer, file: string): unknown {
  const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
  try {
    return JSON.parse(text);
  } catch (err) {
    const at = /at position (\d+)/.exec((err as Error).message);
    if (at === null) throw new ImportError(`${file}: not valid JSON`);
    const before = text.slice(0, Number(at[1]));
    const line = before.split('\n').length;
    throw new ImportError(`${file} line ${line}, column ${before.length - before.lastIndexOf('\n')}: not valid JSON`);
  }
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
