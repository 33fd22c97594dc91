/**
 * `stash container create NAME | list | rm NAME [--force]`.
 * list reads headers only (no password); create needs the vault key; rm needs
 * neither, but asks to confirm and drops the container's key from the agent.
 * rm of a linked shared container only unlinks it: the file is kept.
 */
import { errorCode, errorMessage, type StashError, UsageError } from '../../errors.js';
import {
  containerInfo,
  createContainer,
  defaultVaultDir,
  identityPublic,
  listContainers,
  removeContainer,
  validateContainerName,
  wipe,
} from '../../vault/index.js';
import type { ContainerListing } from '../../vault/containers.js';
import { readRecord } from '../../vault/sharing/records.js';
import { formatTable, out, outJson, warn } from '../output.js';
import { askLine, haveTerminal } from '../prompt.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  switch (inv.command.path[1]) {
    case 'create':
      return create(inv);
    case 'list':
      return list(inv.values.json === true);
    default:
      return remove(inv.positionals[0]!, inv.values.force === true);
  }
}

async function create(inv: Invocation): Promise<number> {
  const name = inv.positionals[0]!;
  validateContainerName(name); // before any password is asked
  const session = new Session(inv.values);
  try {
    const vaultKey = await session.vaultKey();
    try {
      const c = createContainer(session.dir, vaultKey, name);
      out(`Created container ${c.name} (${c.path})`);
    } finally {
      wipe(vaultKey);
    }
    return 0;
  } finally {
    session.close();
  }
}

function list(json: boolean): number {
  const dir = defaultVaultDir();
  const all = listContainers(dir).map((c) => ({ ...c, member: isMember(dir, c) }));
  if (json) {
    outJson(
      all.map((c) => ({
        name: c.name,
        id: c.id || null,
        path: c.path,
        size: known(c) ? c.size : null,
        modified: known(c) ? c.modified.toISOString() : null,
        problem: c.problem,
        missing: c.missing,
        shared: c.shared,
        members: c.members,
        member: c.member,
        link: c.link,
      })),
    );
    return 0;
  }
  if (all.length === 0) {
    out('No containers yet: create one with `stash container create NAME`.');
    return 0;
  }
  const state = (c: (typeof all)[number]): string => {
    if (c.missing) return `MISSING: ${c.problem}`;
    if (c.problem) return `DAMAGED: ${c.problem}`;
    if (!c.shared) return 'ok';
    const members = `shared, ${c.members} member${c.members === 1 ? '' : 's'}`;
    // A removed member still has the file (and a git pull brings the owner's new versions): say why it no longer opens.
    const removed =
      c.member === false ? ', you are not one of them (removed by the owner?): it no longer opens for you' : '';
    return `${members}${removed}${c.link ? `, linked to ${c.link}` : ''}`;
  };
  const rows = all.map((c) => [
    c.name,
    known(c) ? String(c.size) : '-',
    known(c) ? c.modified.toISOString().replace('T', ' ').slice(0, 19) : '-',
    state(c),
  ]);
  for (const line of formatTable(['NAME', 'BYTES', 'MODIFIED', 'STATE'], rows)) out(line);
  return 0;
}

/** Whether this vault is among a shared container's recipients (public keys only: no password); null for a private one. */
function isMember(dir: string, c: ContainerListing): boolean | null {
  if (c.recipients === null) return null;
  try {
    me ??= identityPublic(dir).x25519;
  } catch {
    return null; // no readable identity: nothing to compare with
  }
  return c.recipients.some((k) => k.equals(me!));
}
let me: Buffer | undefined;

/** False when there is no file to measure (a missing link, a damaged record): no size, no 1970 date. */
function known(c: ContainerListing): boolean {
  return !c.missing && c.modified.getTime() !== 0;
}

async function remove(name: string, force: boolean): Promise<number> {
  validateContainerName(name);
  const dir = defaultVaultDir();
  let link: string | null = null;
  try {
    link = readRecord(dir, name)?.link ?? null;
  } catch {
    /* a damaged record is removed with the container */
  }
  let id: string | null = null;
  try {
    id = containerInfo(dir, name).id;
  } catch (err) {
    // A damaged header can still be removed, and so can a link whose file is gone; a missing container cannot.
    const code = (err as StashError).code;
    if (code !== 'CONTAINER_CORRUPT' && !(link !== null && code === 'CONTAINER_NOT_FOUND')) throw err;
  }
  if (link !== null) {
    // Unlinking deletes nothing: the file stays where it is.
    removeContainer(dir, name);
    if (id !== null) await forgetCached(Buffer.from(id, 'hex'));
    out(`Unlinked ${name}; the file ${link} is kept.`);
    return 0;
  }
  if (!force) {
    if (!haveTerminal())
      throw new UsageError(
        `refusing to delete container ${name} without confirmation: there is no terminal to ask on; add --force`,
      );
    const answer = await askLine(
      `Delete container ${name} and every entry in it? This cannot be undone. Type its name to confirm: `,
    );
    if (answer !== name) {
      out('Nothing deleted.');
      return 1;
    }
  }
  removeContainer(dir, name);
  if (id !== null) await forgetCached(Buffer.from(id, 'hex'));
  out(`Deleted container ${name}`);
  return 0;
}

/** Drops the container's key from a running agent (never starts one). */
async function forgetCached(id: Buffer): Promise<void> {
  try {
    const { connectAgent } = await import('../../agent/autostart.js');
    const agent = await connectAgent({ autostart: false });
    try {
      await agent.forget(id);
    } finally {
      agent.close();
    }
  } catch (err) {
    // No agent answers: nothing is cached. Anything else (a configuration error) may leave the key cached: say so.
    if (errorCode(err) !== 'AGENT_UNAVAILABLE')
      warn(`the agent may still hold the deleted container's key (${errorMessage(err)})`);
  }
}
