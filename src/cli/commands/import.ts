/**
 * `stash import FORMAT FILE --into CONTAINER [--dry-run] [--flat] [--overwrite
 * | --skip-existing] [--json]`. The file is read into secure memory, parsed by
 * the module of its format (src/cli/import/: pure parsers from bytes to
 * values), the values of each item become one entry with a path and fields
 * (paths.ts; with --flat, and for dotenv and JSON, one flat name per value:
 * names.ts), and the writer commits them all in one new version of the
 * container. The file is parsed completely before any password is asked, so
 * a malformed one costs nothing.
 *
 * Values live in one secure buffer (collector.ts) and are wiped when the
 * command ends; formats that must be parsed as text (dotenv, JSON) make
 * short-lived JS strings of them, which cannot be wiped. No value is ever
 * printed or logged: messages name lines, fields and items only.
 */
import { StashError, UsageError } from '../../errors.js';
import { containerInfo } from '../../vault/containers.js';
import { type ContainerName, validateContainerName } from '../../vault/names.js';
import { defaultVaultDir } from '../../vault/paths.js';
import { wipe } from '../../vault/secure.js';
import { closeSync } from 'node:fs';
import { join } from 'node:path';
import { Collector } from '../import/collector.js';
import { flatEntries } from '../import/names.js';
import { assignPaths } from '../import/paths.js';
import { printRows, printSummary } from '../import/report.js';
import { commitImport, type PlanRow, type Policy } from '../import/writer.js';
import { warn } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

const FORMATS = ['dotenv', 'json', 'pass', 'bitwarden', '1password'] as const;
type Format = (typeof FORMATS)[number];

/** An export file is a few KiB to a few MiB; the container takes 1 MiB of values at most. */
const MAX_FILE_BYTES = 16 * 1024 * 1024;

function options(inv: Invocation): {
  format: Format;
  file: string;
  into: ContainerName;
  policy: Policy;
  dryRun: boolean;
  json: boolean;
  /** Paths and fields; false with --flat, and for dotenv and JSON (flat by nature). */
  structured: boolean;
} {
  const [format, file] = inv.positionals as [string, string];
  if (!(FORMATS as readonly string[]).includes(format))
    throw new UsageError(`unknown import format ${JSON.stringify(format)}: use one of ${FORMATS.join(', ')}`);
  const into = inv.values.into;
  if (typeof into !== 'string') throw new UsageError('missing --into CONTAINER: the container to import into');
  validateContainerName(into);
  if (inv.values.overwrite === true && inv.values['skip-existing'] === true)
    throw new UsageError('--overwrite and --skip-existing exclude each other');
  const policy: Policy =
    inv.values.overwrite === true ? 'overwrite' : inv.values['skip-existing'] === true ? 'skip' : 'refuse';
  return {
    format: format as Format,
    file,
    into,
    policy,
    dryRun: inv.values['dry-run'] === true,
    json: inv.values.json === true,
    structured: inv.values.flat !== true && format !== 'dotenv' && format !== 'json',
  };
}

/** What a parse leaves to report besides the entries: warnings (names only), and how many files were skipped. */
interface Parsed {
  warnings: string[];
  skipped: number;
}

/** Parses FILE into `sink`; `flat`: the values and names of --flat. */
async function parse(format: Format, file: string, sink: Collector, flat: boolean): Promise<Parsed> {
  if (format === 'pass') return parseStore(file, sink, flat);
  const { readFileSecure } = await import('../secure-read.js');
  const bytes = readFileSecure(file, { maxBytes: MAX_FILE_BYTES, what: 'the import file', stripNewline: false });
  try {
    switch (format) {
      case 'dotenv':
        (await import('../import/dotenv.js')).parseDotenv(bytes, file, sink);
        return { warnings: [], skipped: 0 };
      case 'json':
        (await import('../import/json.js')).parseJsonObject(bytes, file, sink);
        return { warnings: [], skipped: 0 };
      case 'bitwarden':
        return {
          warnings: (await import('../import/bitwarden.js')).parseBitwarden(bytes, file, sink, flat),
          skipped: 0,
        };
      case '1password':
        return { warnings: (await import('../import/onepassword.js')).parseOnePassword(bytes, file, sink), skipped: 0 };
    }
  } finally {
    wipe(bytes);
  }
}

async function parseStore(dir: string, sink: Collector, flat: boolean): Promise<Parsed> {
  const [{ storeEntries, openStoreFile, gpgDecrypt }, { parsePassEntry }] = await Promise.all([
    import('../import/pass-store.js'),
    import('../import/pass.js'),
  ]);
  const { root, files, skipped } = storeEntries(dir);
  if (files.length === 0) {
    for (const w of skipped) warn(w);
    const why = skipped.length > 0 ? ` to import (${skipped.length} skipped, named above)` : '';
    throw new StashError('IMPORT_INVALID', `${dir} holds no .gpg files${why}; is it a password store?`);
  }
  const warnings = [...skipped];
  for (const f of files) {
    const shown = join(dir, `${f.rel}.gpg`);
    const fd = openStoreFile(root, f, shown);
    let plain: Buffer;
    try {
      plain = await gpgDecrypt(fd, shown);
    } finally {
      closeSync(fd);
    }
    try {
      warnings.push(...parsePassEntry(f.rel, plain, sink, flat));
    } finally {
      wipe(plain);
    }
  }
  return { warnings, skipped: skipped.length };
}

export async function run(inv: Invocation): Promise<number> {
  const opts = options(inv);
  // A missing container is named before gpg (pass) or a parse runs: headers only, no password.
  containerInfo(defaultVaultDir(), { name: opts.into });
  const sink = new Collector(opts.file);
  try {
    const { warnings, skipped } = await parse(opts.format, opts.file, sink, !opts.structured);
    for (const w of warnings) warn(w);
    const entries = opts.structured ? assignPaths(sink.entries()) : flatEntries(sink.entries());
    if (entries.length === 0)
      throw new StashError(
        'IMPORT_INVALID',
        `${opts.file} holds no values to import${sink.empty > 0 ? ` (${sink.empty} empty ones are never imported)` : ''}`,
      );
    const session = new Session(inv.values);
    let rows: PlanRow[];
    try {
      rows = await commitImport(session, opts.into, entries, opts.policy, opts.dryRun);
    } finally {
      session.close();
    }
    printRows(rows, opts.structured, opts.json);
    return printSummary(rows, { ...opts, plaintext: opts.format !== 'pass', empty: sink.empty, skipped });
  } finally {
    sink.wipe();
  }
}
