/**
 * The names `stash __complete` offers, read without a password:
 *
 * - containers: from the headers (as `stash container list` does);
 * - entries: only when the running agent holds the container's content key
 *   (connectAgent({autostart: false}): a Tab never starts an agent). Reading
 *   them is a use of the key, so the agent renews its TTL as for any get;
 * - contacts: only when the agent holds the vault key, checked first.
 *
 * There is no Session and no password source here at all, so nothing can
 * prompt; every failure gives an empty list.
 */
import type { AgentClient } from '../../agent/client.js';
import { defaultVaultDir } from '../../vault/paths.js';
import type { NameSource } from './complete.js';

export class VaultNames implements NameSource {
  private readonly dir = defaultVaultDir();
  private agent: AgentClient | null | undefined;

  async containers(): Promise<string[]> {
    try {
      const { listContainers } = await import('../../vault/containers.js');
      return listContainers(this.dir).map((c) => c.name);
    } catch {
      return [];
    }
  }

  async entries(container: string): Promise<string[]> {
    const [{ containerInfo }, { wipeEntries }, { readEntriesOf }, { wipe }] = await Promise.all([
      import('../../vault/containers.js'),
      import('../../vault/container-body.js'),
      import('../container-access.js'),
      import('../../vault/secure.js'),
    ]);
    let key: Buffer | null = null;
    try {
      const info = containerInfo(this.dir, container);
      key = await this.cachedKey(info.id);
      if (key === null) return [];
      const entries = await readEntriesOf(this.dir, info, key);
      const names = [...entries.keys()];
      wipeEntries(entries);
      return names;
    } catch {
      return [];
    } finally {
      wipe(key);
    }
  }

  async contacts(): Promise<string[]> {
    const [{ readVaultInfo, verifyVaultKey }, { listContacts }, { wipe }] = await Promise.all([
      import('../../vault/vault.js'),
      import('../../vault/contacts.js'),
      import('../../vault/secure.js'),
    ]);
    let key: Buffer | null = null;
    try {
      key = await this.cachedKey(readVaultInfo(this.dir).vaultId);
      if (key === null) return [];
      verifyVaultKey(this.dir, key);
      return listContacts(this.dir, key).map((c) => c.name);
    } catch {
      return [];
    } finally {
      wipe(key);
    }
  }

  private async cachedKey(idHex: string): Promise<Buffer | null> {
    if (this.agent === undefined) {
      try {
        const { connectAgent } = await import('../../agent/autostart.js');
        // The blocking transport waits on the JS thread, where runComplete's 3 s guard cannot fire: bound the reply.
        this.agent = await connectAgent({ autostart: false, replyTimeoutMs: 1500 });
      } catch {
        this.agent = null;
      }
    }
    if (this.agent === null) return null;
    const hit = await this.agent.get(Buffer.from(idHex, 'hex'));
    return hit ? hit.key : null;
  }

  close(): void {
    this.agent?.close();
  }
}

/** `stash __complete -- WORDS...`: prints the answer; always exits 0. */
export async function runComplete(argv: string[]): Promise<void> {
  const words = argv[0] === '--' ? argv.slice(1) : argv;
  // A stuck agent or file system must not freeze the shell: answer nothing after 3 s.
  const timer = setTimeout(() => {
    process.stdout.write('none\n');
    process.exit(0);
  }, 3000);
  const names = new VaultNames();
  let text = 'none\n';
  try {
    // Entry names are decrypted here: the same protection as any command (no core file, no ptrace).
    // (Its warning, if any, goes to stderr, which the scripts discard.)
    const [{ hardenCli }, { preloadSodium }] = await Promise.all([
      import('../harden.js'),
      import('../sodium-preload.js'),
    ]);
    preloadSodium();
    await hardenCli();
    const { complete, render } = await import('./complete.js');
    text = render(await complete(words.length > 0 ? words : [''], names));
  } catch {
    /* nothing to offer */
  } finally {
    names.close();
    clearTimeout(timer);
  }
  process.stdout.write(text);
}
