/**
 * `stash container merge NAME FILE [--base FILE] [--prefer SIDE]` and
 * `stash container merge-driver BASE OURS THEIRS`: joining two diverged
 * versions of a shared container into one that every member accepts. merge
 * writes the container's own file; the merge driver is git's (`%O %A %B`),
 * and writes the result into OURS for git to take, exiting non-zero on a
 * conflict so that git records one, with OURS as it was.
 */
import { statSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { StashError, UsageError } from '../../errors.js';
import { atomicWrite } from '../../vault/fs-atomic.js';
import { defaultVaultDir, validateContainerName, wipe } from '../../vault/index.js';
import { readRecord } from '../../vault/sharing/records.js';
import {
  describeConflicts,
  mergeShared,
  mergeSharedFiles,
  sharedContainerOfFile,
  type MergeResult,
  type Prefer,
} from '../../vault/sharing/index.js';
import { historyPolicy } from '../container-access.js';
import { note, out } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  return inv.command.path[1] === 'merge-driver' ? mergeDriver(inv) : merge(inv);
}

function preferOf(raw: unknown): Prefer {
  if (raw !== undefined && raw !== 'container' && raw !== 'file')
    throw new UsageError(`--prefer must be container or file, got ${JSON.stringify(raw)}`);
  return raw === undefined ? null : raw;
}

/** Runs `fn` with the vault key (from the agent, else the password), wiped after. */
async function withVaultKey<T>(inv: Invocation, fn: (dir: string, vaultKey: Buffer) => T): Promise<T> {
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      return fn(session.dir, vaultKey);
    } finally {
      wipe(vaultKey);
    }
  } finally {
    session.close();
  }
}

async function merge(inv: Invocation): Promise<number> {
  const [name, file] = inv.positionals as [string, string];
  validateContainerName(name);
  const prefer = preferOf(inv.values.prefer);
  if (file.length === 0) throw new UsageError('FILE must not be empty');
  const base = typeof inv.values.base === 'string' ? inv.values.base : null;
  if (base === '') throw new UsageError('--base must name a file');
  const { keep } = await historyPolicy();
  const r = await withVaultKey(inv, (dir, vaultKey) => mergeShared(dir, vaultKey, name, file, prefer, keep, base));
  if (r.outcome === 'unchanged') out(`${file} adds nothing to ${name}: its version ${r.revision} already contains it.`);
  else if (r.outcome === 'fast-forward')
    out(
      `${name} now holds version ${r.revision} from ${file}, which already contained everything of the version it replaced.`,
    );
  else reportMerged(r, name, file, prefer, keep);
  return 0;
}

function reportMerged(r: MergeResult, name: string, file: string, prefer: Prefer, keep: number): void {
  out(`Merged ${file} into ${name}: version ${r.revision}, signed by you; every member accepts it as a later version.`);
  if (r.fromOther.length > 0) out(`Taken from ${file}: ${r.fromOther.join(', ')}.`);
  if (r.removed.length > 0) out(`Removed, as ${file} removed them: ${r.removed.join(', ')}.`);
  if (r.conflicts.length > 0)
    out(
      `Changed on both sides: ${describeConflicts(r.conflictChanges, { ours: name, theirs: file })}; kept the side of ${prefer === 'file' ? file : `the container's file`} ${keep === 0 ? '(the other value is not kept: vault.history_keep = 0)' : '(the other value is now version 1 in stash history)'}.`,
    );
  // Only when it can have happened, and naming the entries: without a common version a merge cannot tell an addition from a deletion.
  if (r.oneSided.length > 0)
    out(
      `Held by one side only, so kept: ${r.oneSided.join(', ')}. If the other side had deleted any of them, delete it again (with --purge if it was purged), or merge with --base FILE, the common version.`,
    );
  if (r.historyOneSided.length > 0)
    out(
      `Previous values of removed entries held by one side only, so kept: ${r.historyOneSided.join(', ')}. If the other side had purged any of them, run stash rm ${name} NAME --purge again.`,
    );
}

/**
 * git's merge driver. git runs it in the top folder of the working tree with
 * temporary files; an empty BASE means the two sides have no common version
 * (both added the file). Any failure, a conflict or a vault that cannot be
 * unlocked alike, leaves OURS untouched and exits non-zero: git then records
 * a conflict, and nothing is lost (both sides stay in git's index).
 */
async function mergeDriver(inv: Invocation): Promise<number> {
  const [base, ours, theirs] = inv.positionals as [string, string, string];
  let name: string | null = null;
  try {
    const { keep } = await historyPolicy();
    name = sharedContainerOfFile(defaultVaultDir(), ours);
    const found = name;
    const common = statSync(base, { throwIfNoEntry: false })?.size ? base : null;
    const r = await withVaultKey(inv, (d, vaultKey) =>
      mergeSharedFiles(d, vaultKey, found, { base: common, ours, theirs }, keep),
    );
    if (r.outcome !== 'unchanged') atomicWrite(resolve(ours), [r.bytes]);
    const taken = r.fromOther.length > 0 ? `; from theirs: ${r.fromOther.join(', ')}` : '';
    const removed = r.removed.length > 0 ? `; removed as theirs did: ${r.removed.join(', ')}` : '';
    note(`stash: merged shared container ${name} into version ${r.revision}, signed by you${taken}${removed}`);
    return 0;
  } catch (err) {
    if (!(err instanceof StashError)) throw err;
    throw new StashError(err.code, `${err.message}. ${byHand(name)}`, { cause: err });
  }
}

/** What git leaves after the driver fails, and how to finish the merge by hand. */
function byHand(name: string | null): string {
  let where = '<path>';
  try {
    const link = name === null ? null : readRecord(defaultVaultDir(), name)?.link;
    const rel = link ? relative(process.cwd(), link) : '';
    if (rel !== '' && !rel.startsWith('..')) where = rel;
  } catch {
    /* a hint only */
  }
  const container = name ?? 'NAME';
  return (
    `git records a conflict in ${where}, which still holds your version; nothing is lost. ` +
    `To merge by hand: git show :1:${where} > /tmp/base.stash && git show :3:${where} > /tmp/theirs.stash && ` +
    `stash container merge ${container} /tmp/theirs.stash --base /tmp/base.stash [--prefer container|file], then git add ${where}`
  );
}
