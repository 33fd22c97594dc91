/**
 * Getting keys for one command: from the session agent when it has them, else
 * from the password (asked once, with an `unlock` activity registered while it
 * is read and Argon2id runs), and then cached in the agent for later commands.
 *
 *   vault key     cached under the vault id,     path = the vault folder
 *   content key   cached under the container id, path = the container file
 *                 (a shared container's linked file outside the vault too)
 *
 * A key from the agent is checked before use (verifyVaultKey; the content
 * key's commitment inside the vault library), so a stale entry is dropped and
 * replaced, never trusted. When the agent cannot be reached, the command warns
 * once and carries on without caching. Every key handed out is in sodium
 * secure memory; callers wipe() it.
 */
import type { AgentClient } from '../agent/client.js';
import { UsageError, errorCode, errorMessage } from '../errors.js';
import { MAX_TTL_SECONDS } from '../protocol/limits.js';
import { containerInfo, unwrapContentKey, type ContainerInfo } from '../vault/containers.js';
import type { ContainerName } from '../vault/names.js';
import { defaultVaultDir } from '../vault/paths.js';
import { wipe } from '../vault/secure.js';
import { warn } from './output.js';
import { isExplicit, passwordSource, type PasswordSource } from './password-source.js';
import type { Invocation } from './command-types.js';

// A command served from the agent's cache (`stash get` with a cached key) needs
// only the container file and the agent: the password KDF, the vault key
// check, the prompt and the keyring load on a miss (docs/benchmarks.md).
const vaultLib = () => import('../vault/vault.js');

type Values = Invocation['values'];
type ActivityKind = 'unlock' | 'open' | 'env' | 'form' | 'recovery' | 'vault';

/** --ttl SECONDS, checked against the agent's limits; null when absent. */
export function ttlOption(values: Values): number | null {
  const raw = values.ttl;
  if (typeof raw !== 'string') return null;
  if (!/^[0-9]+$/.test(raw) || Number(raw) <= 0 || Number(raw) > MAX_TTL_SECONDS) {
    throw new UsageError(
      `--ttl must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS} (30 days), got ${JSON.stringify(raw)}`,
    );
  }
  return Number(raw);
}

export class Session {
  readonly dir: string;
  readonly ttl: number | null;
  readonly source: PasswordSource;
  private client: AgentClient | null | undefined;
  private warned = false;
  private readonly serverGiven: boolean;

  constructor(values: Values, opts: { dir?: string } = {}) {
    this.dir = opts.dir ?? defaultVaultDir();
    this.ttl = ttlOption(values);
    this.source = passwordSource(values);
    this.serverGiven = typeof values.server === 'string';
  }

  private agentFailed(err: unknown): void {
    this.client?.close();
    this.client = null;
    if (this.warned) return;
    this.warned = true;
    warn(`the session agent is unavailable (${errorMessage(err)}); continuing without caching keys`);
  }

  /**
   * The agent, started when none runs; null (after one warning) when it cannot
   * be reached. A bad config value throws (CONFIG, exit 78) whether or not an
   * agent already runs: a read checks the settings as a write or a new agent
   * does, so `STASH_HISTORY_KEEP=101 stash get` fails as `stash set` would.
   */
  async agent(): Promise<AgentClient | null> {
    if (this.client !== undefined) return this.client;
    const { settingsMayBeSet } = await import('../config/config-path.js');
    if (settingsMayBeSet(process.env)) {
      const { agentSettings } = await import('../agent/config.js');
      // A command given --server names its key server itself: the setting it overrides is not read.
      await agentSettings(process.env, { keyServerUrl: !this.serverGiven });
    }
    try {
      const { connectAgent } = await import('../agent/autostart.js');
      this.client = await connectAgent({ autostart: true }); // STASH_AGENT_TRANSPORT's transport
    } catch (err) {
      // A bad config value is the user's to fix now (exit 78), not a reason to carry on uncached.
      if (errorCode(err) === 'CONFIG') throw err;
      this.agentFailed(err);
    }
    return this.client ?? null;
  }

  /** Runs `fn` while an activity of `kind` is registered for `pid` (ours or a child). */
  async withActivity<T>(kind: ActivityKind, pid: number, fn: () => Promise<T>): Promise<T> {
    const token = await this.register(kind, pid);
    try {
      return await fn();
    } finally {
      if (token !== null) await this.unregister(pid, token);
    }
  }

  /** Registers an activity; null when the agent is unavailable (warned). */
  async register(kind: ActivityKind, pid: number): Promise<string | null> {
    const agent = await this.agent();
    if (!agent) return null;
    try {
      return await agent.registerActivity(pid, kind);
    } catch (err) {
      if (errorCode(err) === 'AGENT_UNAVAILABLE') this.agentFailed(err);
      else warn(`could not register the ${kind} activity with the agent: ${errorMessage(err)}`);
      return null;
    }
  }

  async unregister(pid: number, token: string): Promise<void> {
    const agent = this.client;
    if (!agent) return;
    try {
      await agent.unregisterActivity(pid, token);
    } catch (err) {
      // The agent prunes activities of exited processes by itself; a miss here is harmless.
      if (errorCode(err) === 'AGENT_UNAVAILABLE') this.agentFailed(err);
    }
  }

  /** A key from the agent, or null on a miss or when the agent is unavailable. */
  private async cached(id: Buffer): Promise<Buffer | null> {
    const agent = await this.agent();
    if (!agent) return null;
    try {
      const hit = await agent.get(id);
      return hit ? hit.key : null;
    } catch (err) {
      this.agentFailed(err);
      return null;
    }
  }

  /** Stores a key in the agent (a copy; the caller keeps its buffer). */
  async cache(id: Buffer, key: Buffer, path: string, ttl: number | null = this.ttl): Promise<boolean> {
    const agent = await this.agent();
    if (!agent) return false;
    try {
      await agent.put(id, key, { path, ttl });
      return true;
    } catch (err) {
      // The agent is there but caches nothing now (the screen is locked, the machine going to sleep): say why once, go on.
      const code = errorCode(err);
      if (code === 'AGENT_SESSION_LOCKED' || code === 'AGENT_SUSPENDING') {
        const why =
          code === 'AGENT_SESSION_LOCKED'
            ? 'the session is locked, and the agent caches no key until it is unlocked'
            : 'the machine is going to sleep, and the agent caches no key until it resumes';
        if (!this.warned) warn(`${why}; continuing without caching`);
        this.warned = true;
      } else {
        this.agentFailed(err);
      }
      return false;
    }
  }

  /** Removes a (stale) entry; errors are ignored. */
  async forget(id: Buffer): Promise<void> {
    const agent = await this.agent();
    await agent?.forget(id).catch(() => false);
  }

  /** The vault key: from the agent, else from the password (and then cached). */
  async vaultKey(): Promise<Buffer> {
    const { readVaultInfo, verifyVaultKey } = await vaultLib();
    const id = Buffer.from(readVaultInfo(this.dir).vaultId, 'hex');
    const hit = await this.cached(id);
    if (hit) {
      try {
        verifyVaultKey(this.dir, hit);
        return hit;
      } catch (err) {
        wipe(hit);
        if (errorCode(err) !== 'VAULT_KEY_MISMATCH') throw err;
        await this.forget(id); // a key of an older vault at this path
      }
    }
    const key = await this.vaultKeyFromPassword();
    await this.cache(id, key, this.dir);
    return key;
  }

  /**
   * The vault key from the password alone (never from the agent), with an
   * `unlock` activity registered meanwhile. `keyring: false` skips auto-unlock
   * (for commands that must prove the password is known, like passwd).
   */
  async vaultKeyFromPassword(opts: { keyring?: boolean } = {}): Promise<Buffer> {
    const vaultId = (await vaultLib()).readVaultInfo(this.dir).vaultId;
    return this.withActivity('unlock', process.pid, () => this.unlockWithPassword(vaultId, opts.keyring ?? true));
  }

  /**
   * Derives the vault key from the password: an explicit source (flag, file,
   * stdin) first, then the OS keyring when auto-unlock is enabled, then up to
   * three tries at the terminal prompt.
   */
  private async unlockWithPassword(vaultId: string, useKeyring: boolean): Promise<Buffer> {
    const [{ unlockVault }, { promptPassword, readExplicitPassword }] = await Promise.all([
      vaultLib(),
      import('./password.js'),
    ]);
    const explicit = readExplicitPassword(this.source);
    if (explicit) {
      try {
        return await unlockVault(this.dir, explicit);
      } finally {
        wipe(explicit);
      }
    }
    const fromKeyring = useKeyring ? await this.keyringUnlock(vaultId) : null;
    if (fromKeyring) return fromKeyring;
    for (let attempt = 1; ; attempt++) {
      let pw: Buffer;
      try {
        pw = await promptPassword(`Password for the vault at ${this.dir}: `);
      } catch (err) {
        // An Enter pressed too early counts as a try, not as the end.
        if (errorCode(err) !== 'INVALID_PASSWORD' || attempt >= 3) throw err;
        process.stderr.write('The password cannot be empty; try again.\n');
        continue;
      }
      try {
        return await unlockVault(this.dir, pw);
      } catch (err) {
        if (errorCode(err) !== 'WRONG_PASSWORD' || attempt >= 3) throw err;
        process.stderr.write('Wrong password; try again.\n');
      } finally {
        wipe(pw);
      }
    }
  }

  /** The vault key from the keyring's password, or null (with a warning when something is wrong). */
  private async keyringUnlock(vaultId: string): Promise<Buffer | null> {
    const [{ unlockVault }, { autoUnlockEnabled, keyringGet }] = await Promise.all([
      vaultLib(),
      import('./keyring.js'),
    ]);
    let enabled: boolean;
    try {
      enabled = autoUnlockEnabled(vaultId);
    } catch (err) {
      warn(errorMessage(err));
      return null;
    }
    if (!enabled) return null;
    let pw: Buffer | null;
    try {
      pw = keyringGet(vaultId);
    } catch (err) {
      warn(`auto-unlock: ${errorMessage(err)}; asking for the password instead`);
      return null;
    }
    if (!pw) {
      warn(
        'auto-unlock is enabled but the keyring holds no password for this vault; run `stash vault sessions auto-unlock enable` again',
      );
      return null;
    }
    try {
      return await unlockVault(this.dir, pw);
    } catch (err) {
      if (errorCode(err) !== 'WRONG_PASSWORD') throw err;
      warn(
        'auto-unlock: the password in the keyring no longer opens this vault; run `stash vault sessions auto-unlock enable` again',
      );
      return null;
    } finally {
      wipe(pw);
    }
  }

  /**
   * The content key of container `name`: from the agent, else unwrapped with
   * the vault key and cached. The header is read once for both.
   */
  async contentKey(name: ContainerName): Promise<{ key: Buffer; info: ContainerInfo; fromCache: boolean }> {
    const info = containerInfo(this.dir, { name });
    const hit = await this.cached(Buffer.from(info.id, 'hex'));
    if (hit) return { key: hit, info, fromCache: true };
    const vaultKey = await this.vaultKey();
    try {
      return { key: await this.unwrapInfo(info, vaultKey), info, fromCache: false };
    } finally {
      wipe(vaultKey);
    }
  }

  /** The content key of `name` when the agent holds it, else null: never asks for a password. */
  async cachedContentKey(name: ContainerName): Promise<{ key: Buffer; info: ContainerInfo } | null> {
    const info = containerInfo(this.dir, { name });
    const hit = await this.cached(Buffer.from(info.id, 'hex'));
    return hit ? { key: hit, info } : null;
  }

  /**
   * The content key of `name` opened with `vaultKey` (the caller's, left
   * unwiped: one vault key can open several containers), then cached.
   */
  async unwrapContentKey(name: ContainerName, vaultKey: Buffer): Promise<{ key: Buffer; info: ContainerInfo }> {
    const info = containerInfo(this.dir, { name });
    return { key: await this.unwrapInfo(info, vaultKey), info };
  }

  /** The content key of the container `info` describes, opened with `vaultKey`, then cached. */
  private async unwrapInfo(info: ContainerInfo, vaultKey: Buffer): Promise<Buffer> {
    // A shared container's key is sealed to this vault's identity, not wrapped by the vault key.
    const key = info.shared
      ? await (await import('./container-access.js')).openSharedKey(this.dir, vaultKey, info)
      : unwrapContentKey(this.dir, vaultKey, info);
    await this.cache(Buffer.from(info.id, 'hex'), key, info.path);
    return key;
  }

  /**
   * Runs `fn` with the content key of `name`, wiping it afterwards. A cached
   * key that turns out not to fit (CONTENT_KEY_MISMATCH: the container was
   * replaced) is dropped from the agent and the key is unwrapped afresh once.
   */
  async withContentKey<T>(name: ContainerName, fn: (key: Buffer, info: ContainerInfo) => T | Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const { key, info, fromCache } = await this.contentKey(name);
      try {
        return await fn(key, info);
      } catch (err) {
        if (!fromCache || attempt > 0 || errorCode(err) !== 'CONTENT_KEY_MISMATCH') throw err;
        await this.forget(Buffer.from(info.id, 'hex'));
      } finally {
        wipe(key);
      }
    }
  }

  /** True when the password would come from a script rather than a person. */
  get explicitPassword(): boolean {
    return isExplicit(this.source);
  }

  close(): void {
    this.client?.close();
    this.client = null;
  }
}
