/**
 * `stash set [CONTAINER] PATH` and `stash get [CONTAINER] PATH` (one argument:
 * a path in the default container, entry-target.ts). get is the only
 * command that prints a secret; it writes the value's exact bytes (plus a
 * newline only when stdout is a terminal) and wipes them once written.
 */
import { StashError, UsageError } from '../../errors.js';
import type { ContainerInfo } from '../../vault/containers.js';
import type { Generator } from '../generate/options.js';
import { readEntriesOf, readEntryOf, updateEntriesOf } from '../container-access.js';
import { type ContainerName, MAX_VALUE_BYTES } from '../../vault/names.js';
import { type EntryPath, fieldKey, validateFieldName } from '../../vault/entry-path.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { writeStdout } from '../../output-streams.js';
import { note, warn } from '../output.js';
import { isTerminal } from '../terminal.js';
import type { Invocation } from '../command-types.js';
import { entryTarget } from '../entry-target.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const { container, path: name } = await entryTarget(inv);
  const isGet = inv.command.path[0] === 'get';
  const field = isGet ? fieldOption(inv.values.field) : null;
  const fields = isGet ? [] : fieldAssignments(inv.values.field);
  const session = new Session(inv.values);
  try {
    if (isGet) return await get(session, container, name, field, inv.values);
    const setOptions = {
      allowEmpty: inv.values['allow-empty'] === true,
      raw: inv.values.raw === true,
      force: inv.values.force === true,
      generate: await generateOption(inv.values),
      print: inv.values.print === true,
      totp: totpOption(inv.values),
    };
    if (fields.length > 0) return await setFields(session, container, name, fields, setOptions);
    return await set(session, container, name, setOptions);
  } finally {
    session.close();
  }
}

/** get --field NAME: the field's name, checked, or null. */
function fieldOption(raw: unknown): string | null {
  if (raw === undefined) return null;
  validateFieldName(raw);
  return raw;
}

/** One --field of set: a name and its value, or null when it is read from stdin or a prompt. */
interface FieldAssignment {
  name: string;
  value: string | null;
}

/** set --field NAME=VALUE (repeatable) and --field NAME, checked. */
function fieldAssignments(raw: unknown): FieldAssignment[] {
  if (raw === undefined) return [];
  const out: FieldAssignment[] = [];
  for (const text of raw as string[]) {
    const eq = text.indexOf('=');
    const name = eq < 0 ? text : text.slice(0, eq);
    validateFieldName(name);
    if (out.some((f) => f.name === name)) throw new UsageError(`--field ${name} is given twice`);
    out.push({ name, value: eq < 0 ? null : text.slice(eq + 1) });
  }
  if (out.filter((f) => f.value === null).length > 1)
    throw new UsageError(
      'only one --field NAME (without "=") can be read from stdin or the prompt; give the others as NAME=VALUE',
    );
  return out;
}

async function get(
  session: Session,
  container: ContainerName,
  path: EntryPath,
  field: string | null,
  values: Invocation['values'],
): Promise<number> {
  if (values.json === true && (values.clip === true || values['clip-seconds'] !== undefined))
    throw new UsageError('--clip and --json do not go together');
  const version = values.version === undefined ? null : (await import('./history.js')).parseVersion(values.version);
  const name = field === null ? path : fieldKey(path, field);
  if (values.json === true)
    return (await import('./entry-json.js')).getJson(session, container, path, field, values, version);
  // --clip is checked (and its tool found) before any password is asked; loaded only with --clip.
  const clip =
    values.clip === true || values['clip-seconds'] !== undefined ? await import('../clipboard/copy.js') : null;
  const request = clip ? await clip.clipRequest(values) : null;
  const value = await session.withContentKey(container, (key, info) =>
    version === null
      ? readEntryOf(session.dir, info, key, name)
      : readVersionOf(session, info, key, container, name, version),
  );
  try {
    if (clip && request) {
      await clip.copyToClipboard(value, name, request);
      return 0;
    }
    await writeStdout(value);
    if (isTerminal(1)) await writeStdout('\n');
  } finally {
    wipe(value);
  }
  return 0;
}

/** Previous value `version` of NAME as a secure copy (release with wipe()). */
async function readVersionOf(
  session: Session,
  info: ContainerInfo,
  key: Buffer,
  container: string,
  name: string,
  version: number,
): Promise<Buffer> {
  const [{ wipeEntries }, { selectVersion }] = await Promise.all([
    import('../../vault/container-body.js'),
    import('./history.js'),
  ]);
  const entries = await readEntriesOf(session.dir, info, key);
  try {
    return secureCopy(selectVersion(entries, container, name, version).value);
  } finally {
    wipeEntries(entries);
  }
}

/**
 * The value: stdin when it is not a terminal (one trailing newline dropped,
 * unless --raw keeps every byte), else a hidden prompt asked twice. Both
 * readers load here, off the `get` path.
 */
async function readValue(session: Session, name: string, raw: boolean): Promise<Buffer> {
  if (!isTerminal(0)) {
    if (session.source.stdin) {
      throw new UsageError(
        '--password-stdin cannot be used while the value comes from standard input; use --password-file FILE',
      );
    }
    const { readFdSecure } = await import('../secure-read.js');
    return readFdSecure(0, {
      maxBytes: MAX_VALUE_BYTES,
      what: `the value of ${name} on standard input`,
      stripNewline: !raw,
    });
  }
  const [{ promptHidden }, { repeatMatches }] = await Promise.all([import('../prompt.js'), import('../password.js')]);
  // Typed blind, so typed twice: a slip would silently become the stored secret.
  for (let attempt = 1; ; attempt++) {
    const first = await promptHidden(`Value of ${name} (hidden): `, MAX_VALUE_BYTES);
    if (first.length === 0) return first; // refused (or, with --allow-empty, meant): nothing to repeat
    if (await repeatMatches(first, () => promptHidden(`Repeat the value of ${name}: `, MAX_VALUE_BYTES))) return first;
    if (attempt >= 3)
      throw new StashError('VALUE_MISMATCH', `the two values of ${name} differed three times; nothing was stored`);
    note('The two values differ; try again.');
  }
}

/**
 * An empty value is nearly always a slip (Enter at the prompt, a pipe whose
 * producer failed) that would silently replace a secret with "".
 */
function refuseEmpty(value: Buffer, name: string, allowEmpty: boolean): Buffer {
  if (value.length > 0 || allowEmpty) return value;
  wipe(value);
  throw new UsageError(`the value of ${name} is empty; nothing was stored (add --allow-empty to store an empty value)`);
}

/** True when `name` exists in the container (the entries are opened and wiped again). */
async function entryExists(session: Session, info: ContainerInfo, key: Buffer, name: string): Promise<boolean> {
  const [{ readEntriesOf }, { wipeEntries }] = await Promise.all([
    import('../container-access.js'),
    import('../../vault/container-body.js'),
  ]);
  const entries = await readEntriesOf(session.dir, info, key);
  try {
    return entries.has(name);
  } finally {
    wipeEntries(entries);
  }
}

/**
 * At a terminal an existing entry is replaced only after a yes (--force skips
 * the question); a value piped in replaces it as before, since a script has
 * nobody to ask. Either way the message says whether it replaced.
 */
async function confirmReplace(container: string, name: string): Promise<void> {
  const { askLine } = await import('../prompt.js');
  const answer = await askLine(`${name} already exists in ${container}. Replace it? [y/N] `);
  if (answer === null || !/^y(es)?$/i.test(answer)) {
    throw new StashError(
      'CANCELLED',
      `kept the existing ${name}; nothing was stored (--force replaces without asking)`,
    );
  }
}

/** The generator of --generate (checked before any password is asked), or null. */
async function generateOption(values: Invocation['values']): Promise<Generator | null> {
  const { anyGeneratorOption, generatorFrom } = await import('../generate/options.js');
  if (values.generate !== true) {
    if (anyGeneratorOption(values) || values.print === true)
      throw new UsageError('--length, --words, --charset, --no-symbols, --separator and --print go with --generate');
    return null;
  }
  if (values.raw === true || values['allow-empty'] === true)
    throw new UsageError('--generate makes the value: --raw and --allow-empty do not apply');
  return generatorFrom(values);
}

interface SetOptions {
  allowEmpty: boolean;
  raw: boolean;
  force: boolean;
  generate: Generator | null;
  print: boolean;
  totp: string | null;
}

/** --totp URI|SECRET|-: checked for combinations here, parsed once the value is known. */
function totpOption(values: Invocation['values']): string | null {
  const raw = values.totp;
  if (raw === undefined) return null;
  if (typeof raw !== 'string' || raw.length === 0)
    throw new UsageError('--totp needs an otpauth://totp/ URI, a base32 secret, or - to read it like a value');
  if (values.generate === true || values.raw === true || values['allow-empty'] === true)
    throw new UsageError('--totp does not combine with --generate, --raw or --allow-empty');
  if (raw !== '-')
    warn(
      'a secret on the command line is visible to other local users (ps, /proc) and stays in your shell history; next time use --totp - and give it on stdin or at the prompt',
    );
  return raw;
}

/** The normalised otpauth URI to store, from the option or (for `-`) from stdin or the prompt. */
async function totpValue(session: Session, name: string, option: string, piped: Buffer | null): Promise<Buffer> {
  const { formatTotp, parseTotp } = await import('../totp/otpauth.js');
  const { secureCopy } = await import('../../vault/secure.js');
  const source = option === '-' ? (piped ?? (await readValue(session, name, false))) : null;
  try {
    const params = parseTotp(source ? source.toString('utf8') : option);
    const stored = secureCopy(Buffer.from(formatTotp(params)));
    params.secret.fill(0);
    return stored;
  } finally {
    wipe(source);
  }
}

/**
 * set PATH --field ...: the fields given, and the value only when the entry
 * is new (read as set reads it) or --generate makes one. stdin is read only
 * when something is to be read from it, once the container is open.
 */
async function setFields(
  session: Session,
  container: ContainerName,
  path: EntryPath,
  fields: FieldAssignment[],
  opts: SetOptions,
): Promise<number> {
  if (opts.totp !== null) throw new UsageError('--totp sets the value; store a seed in a field with --field totp=URI');
  if (opts.print && !opts.generate) throw new UsageError('--print goes with --generate');
  const made: Buffer[] = [];
  let created = false;
  try {
    await session.withContentKey(container, async (key, info) => {
      const exists = await entryExists(session, info, key, path);
      const changes = new Map<string, Buffer>();
      const reading = fields.find((f) => f.value === null);
      if (opts.generate) changes.set(path, opts.generate.next());
      else if (!exists) {
        if (reading)
          throw new UsageError(
            `${path} does not exist in ${container}: store its value first (stash set ${container} ${path}), then read field ${reading.name}`,
          );
        changes.set(path, refuseEmpty(await readValue(session, path, opts.raw), path, opts.allowEmpty));
      }
      for (const f of fields) {
        const label = `${path}#${f.name}`;
        const value =
          f.value === null ? await readValue(session, label, opts.raw) : secureCopy(Buffer.from(f.value, 'utf8'));
        // A totp field is checked and stored as one normalised otpauth URI, as set --totp stores a value.
        const stored = f.name === 'totp' ? await totpValue(session, label, '-', value) : value;
        changes.set(fieldKey(path, f.name), refuseEmpty(stored, label, opts.allowEmpty));
      }
      made.push(...changes.values());
      created = !exists;
      await updateEntriesOf(session, info, key, changes);
    });
    note(
      `${created ? 'Stored' : 'Updated'} ${path} in ${container}: field${fields.length > 1 ? 's' : ''} ${fields.map((f) => f.name).join(', ')}${opts.generate ? ` and a generated value (${opts.generate.describe})` : created ? ' and its value' : ''}.`,
    );
    const generated = opts.generate ? made[0] : undefined;
    if (opts.print && generated) {
      await writeStdout(generated);
      if (isTerminal(1)) await writeStdout('\n');
    }
    return 0;
  } finally {
    for (const b of made) wipe(b);
  }
}

async function set(session: Session, container: ContainerName, name: EntryPath, opts: SetOptions): Promise<number> {
  const interactive = isTerminal(0);
  // A value piped in is read first, so that a password prompt cannot consume it
  // and an empty one is refused before any password is asked. A generated one
  // needs nothing read.
  let value = opts.generate
    ? opts.generate.next()
    : interactive || (opts.totp !== null && opts.totp !== '-')
      ? null
      : refuseEmpty(await readValue(session, name, opts.raw), name, opts.allowEmpty);
  // A seed is checked (and normalised) before any password is asked when it is at hand.
  if (opts.totp !== null && (opts.totp !== '-' || value !== null))
    value = await totpValue(session, name, opts.totp, value);
  let replaced = false;
  try {
    await session.withContentKey(container, async (key, info) => {
      replaced = await entryExists(session, info, key, name);
      if (value === null) {
        if (replaced && !opts.force) await confirmReplace(container, name);
        value =
          opts.totp !== null
            ? await totpValue(session, name, opts.totp, null)
            : refuseEmpty(await readValue(session, name, opts.raw), name, opts.allowEmpty);
      }
      await updateEntriesOf(session, info, key, new Map([[name, value]]));
    });
  } catch (err) {
    wipe(value);
    throw err;
  }
  try {
    note(
      `${replaced ? 'Replaced' : 'Stored'} ${name} in ${container}${opts.generate ? ` (generated: ${opts.generate.describe})` : ''}.`,
    );
    // Printed once, after it is safely stored, and only when asked for.
    if (opts.print && value) {
      await writeStdout(value);
      if (isTerminal(1)) await writeStdout('\n');
    }
  } finally {
    wipe(value);
  }
  return 0;
}
