/**
 * `stash open CONTAINER [--ttl SECONDS]`: unlocks the container's key into the
 * session agent, so later commands need no password until it expires. The
 * body is decrypted once to prove the key and the file are sound. An `open`
 * activity is registered while it works.
 */
import { StashError } from '../../errors.js';
import { DEFAULT_TTL_SECONDS } from '../../protocol/limits.js';
import { validateContainerName, wipeEntries } from '../../vault/index.js';
import { wipe } from '../../vault/secure.js';
import { readEntriesOf } from '../container-access.js';
import { formatDuration, out } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';

export async function run(inv: Invocation): Promise<number> {
  const name = inv.positionals[0]!;
  validateContainerName(name);
  const session = new Session(inv.values);
  try {
    if (!(await session.agent())) {
      throw new StashError(
        'AGENT_UNAVAILABLE',
        `cannot open ${name}: the session agent is unavailable, so there is nowhere to keep its key; nothing was cached`,
      );
    }
    let count = 0;
    let kept = false;
    await session.withActivity('open', process.pid, () =>
      session.withContentKey(name, async (key, info) => {
        const entries = await readEntriesOf(session.dir, info, key);
        count = entries.size;
        wipeEntries(entries);
        const id = Buffer.from(info.id, 'hex');
        // Re-put even a cached key so that --ttl takes effect now.
        if (session.ttl !== null) await session.cache(id, key, info.path);
        // Caching is all `open` is for: an agent that refused the key (at capacity, full,
        // going to sleep) or went away meanwhile was only warned about on the way.
        kept = await agentHolds(session, id);
      }),
    );
    if (!kept) {
      throw new StashError(
        'AGENT_UNAVAILABLE',
        `cannot open ${name}: the session agent did not keep its key; nothing was cached`,
      );
    }
    const ttl = session.ttl ?? DEFAULT_TTL_SECONDS;
    out(
      `Opened ${name} (${count} ${count === 1 ? 'entry' : 'entries'}) for ${formatDuration(ttl * 1000)}, renewed on each use.`,
    );
    out(`Lock it with: stash vault sessions lock ${name}`);
    return 0;
  } finally {
    session.close();
  }
}

/** True when the agent holds a key under `id` now (asked with a get, which renews it like any use). */
async function agentHolds(session: Session, id: Buffer): Promise<boolean> {
  const agent = await session.agent();
  if (!agent) return false;
  try {
    const hit = await agent.get(id);
    if (hit) wipe(hit.key);
    return hit !== null;
  } catch {
    return false;
  }
}
