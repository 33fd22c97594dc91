/**
 * What `stash import` prints: one row per entry on stdout (names, fields and
 * sources, never a value), and one summary line on stderr. A flat import
 * lists `NAME ACTION FROM` as stash always did; a structured one `PATH ACTION
 * FIELDS FROM`, where a field the source named otherwise shows that name
 * (`username ("login")`), so `--dry-run` shows the whole mapping.
 */
import { ExitCode } from '../exit-codes.js';
import { formatTable, note, out, outJson, terminalSafe } from '../output.js';
import type { PlanRow } from './writer.js';

/** What the summary needs besides the rows. */
export interface ReportContext {
  into: string;
  file: string;
  dryRun: boolean;
  /** Entries have paths and fields (not `--flat`, not dotenv or JSON). */
  structured: boolean;
  /** A plaintext export (not a password store): the user is told to delete it. */
  plaintext: boolean;
  /** Empty values left out, and files or folders of a password store skipped. */
  empty: number;
  skipped: number;
}

const mapped = (from: string, source: string | null): string =>
  source === null ? from : `${from} (named ${JSON.stringify(source)})`;

/** The rows, as a table or (`json`) an array. */
export function printRows(rows: PlanRow[], structured: boolean, json: boolean): void {
  if (json) {
    outJson(
      rows.map((r) =>
        structured
          ? { path: r.entry, action: r.action, from: r.from, mappedFrom: r.mappedFrom, fields: r.fields }
          : { name: r.entry, action: r.action, from: r.from, mappedFrom: r.mappedFrom },
      ),
    );
    return;
  }
  const lines = structured
    ? formatTable(
        ['PATH', 'ACTION', 'FIELDS', 'FROM'],
        rows.map((r) => [
          r.entry,
          r.action,
          r.fields
            .map((f) => (f.mappedFrom === null ? f.name : `${f.name} (${JSON.stringify(f.mappedFrom)})`))
            .join(', ') || '-',
          mapped(r.from, r.mappedFrom),
        ]),
      )
    : formatTable(
        ['NAME', 'ACTION', 'FROM'],
        rows.map((r) => [r.entry, r.action, mapped(r.from, r.mappedFrom)]),
      );
  // Names and titles come from the file: shown terminal-safe, as key server text is.
  for (const line of lines) out(terminalSafe(line));
}

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

/** The summary line on stderr; returns the exit status. */
export function printSummary(rows: PlanRow[], c: ReportContext): number {
  const count = (a: PlanRow['action']): number => rows.filter((r) => r.action === a).length;
  const renamed = rows.filter((r) => r.mappedFrom !== null).length;
  const fields = rows.filter((r) => r.action !== 'skip').reduce((n, r) => n + r.fields.length, 0);
  const extra = [
    c.structured && fields > 0 ? `${plural(fields, 'field', 'fields')} besides the values` : '',
    renamed > 0
      ? `${plural(renamed, c.structured ? 'path' : 'name', c.structured ? 'paths' : 'names')} mapped (see FROM)`
      : '',
    count('skip') > 0 ? `${count('skip')} kept as they were (--skip-existing)` : '',
    c.empty > 0 ? `${plural(c.empty, 'empty value', 'empty values')} left out` : '',
    c.skipped > 0 ? `${plural(c.skipped, 'file or folder', 'files or folders')} skipped (named above)` : '',
  ]
    .filter(Boolean)
    .join('; ');
  const tail = extra ? `; ${extra}` : '';
  if (c.dryRun) {
    const taken = count('exists');
    note(`Dry run: nothing was written. ${count('new')} new, ${count('replace')} to replace${tail}.`);
    if (taken > 0) {
      note(
        `${plural(taken, 'name', 'names')} already exist in ${c.into}: the import would be refused without --overwrite or --skip-existing.`,
      );
      return ExitCode.cantCreate;
    }
    return 0;
  }
  const written = count('new') + count('replace');
  note(
    `Imported ${written} entr${written === 1 ? 'y' : 'ies'} into ${c.into} in one new version: ${count('new')} new, ${count('replace')} replaced${tail}.`,
  );
  if (c.plaintext) {
    note(
      `${c.file} holds these secrets in plain text: delete it now (shred -u ${c.file}, or rm it and empty the trash), and any copy of it.`,
    );
  }
  return 0;
}
