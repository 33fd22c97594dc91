/**
 * CSV as RFC 4180 writes it (and 1Password, Bitwarden and browsers export
 * it): fields separated by commas, records by \n or \r\n, a field in double
 * quotes may hold commas, newlines and "" for one quote. A UTF-8 byte order
 * mark is skipped.
 *
 * It works on the bytes in place, so that a value never becomes a JS
 * string: each field is a view of the input (a quoted field is unescaped in
 * place, which only shortens it). The input must not be used for anything
 * else afterwards.
 */
import { ImportError } from './collector.js';

export interface CsvRecord {
  /** The line the record starts on (1-based). */
  line: number;
  /** Views of the input buffer. */
  fields: Buffer[];
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const LF = 0x0a;
const CR = 0x0d;

/** Every record of `bytes` (blank lines skipped); errors name `file` and the line. */
export function parseCsv(bytes: Buffer, file: string): CsvRecord[] {
  const records: CsvRecord[] = [];
  let i = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  let line = 1;
  while (i < bytes.length) {
    if (bytes[i] === LF || (bytes[i] === CR && bytes[i + 1] === LF)) {
      i += bytes[i] === CR ? 2 : 1;
      line++;
      continue;
    }
    const start = line;
    const fields: Buffer[] = [];
    for (;;) {
      let field: Buffer;
      if (bytes[i] === QUOTE) {
        // Unescape "" in place: `w` trails `r` and only ever writes behind it.
        const begin = i + 1;
        let r = begin;
        let w = begin;
        for (;;) {
          if (r >= bytes.length) throw new ImportError(`${file} line ${start}: a quoted field is not closed`);
          const c = bytes[r]!;
          if (c === QUOTE) {
            if (bytes[r + 1] === QUOTE) {
              bytes[w++] = QUOTE;
              r += 2;
              continue;
            }
            r++;
            break;
          }
          if (c === LF) line++;
          bytes[w++] = c;
          r++;
        }
        field = bytes.subarray(begin, w);
        i = r;
        const next = bytes[i];
        if (next !== undefined && next !== COMMA && next !== LF && !(next === CR && bytes[i + 1] === LF)) {
          throw new ImportError(
            `${file} line ${line}: text after the closing quote of a field (a quote inside a field is written "")`,
          );
        }
      } else {
        const begin = i;
        while (i < bytes.length && bytes[i] !== COMMA && bytes[i] !== LF && !(bytes[i] === CR && bytes[i + 1] === LF)) {
          if (bytes[i] === QUOTE)
            throw new ImportError(
              `${file} line ${line}: a quote inside an unquoted field (quote the whole field and write the quote as "")`,
            );
          i++;
        }
        field = bytes.subarray(begin, i);
      }
      fields.push(field);
      if (bytes[i] === COMMA) {
        i++;
        continue;
      }
      break;
    }
    records.push({ line: start, fields });
  }
  return records;
}
