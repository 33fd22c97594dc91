/**
 * The secret-activity registry: running commands that handle secrets (an
 * unlocked vault, an `env` child, a form fill...) register with the agent, so
 * that the machine is kept awake while they run (the power integration's block
 * lock) and so that they can be terminated when the machine suspends anyway.
 *
 * Every entry records the process start time next to its pid: a pid whose
 * process exited may be reused, and a recycled pid must never be signalled or
 * keep the machine awake. See proc-info/.
 *
 * The registration token is 128 random bits returned once as 32 hex chars; the
 * registry keeps only its SHA-256, so it holds nothing that could unregister an
 * activity if its memory were read.
 */
import { StashError } from '../errors.js';
import { loadSodium } from '../native/sodium.js';
import {
  isSameProcess,
  isSelfOrDescendant,
  readProcInfo,
  signalIfSame,
  type ProcInfo,
  type SignalResult,
} from './proc-info/index.js';

export const ACTIVITY_KINDS = ['unlock', 'open', 'env', 'form', 'recovery', 'vault'] as const;
export type ActivityKind = (typeof ACTIVITY_KINDS)[number];

/**
 * Kinds that hold no sleep inhibitor and are terminated on every suspend,
 * whatever terminate_on_suspend says. A `form` activity is a pending
 * clipboard clear (`stash get --clip`): waiting to clear a clipboard is no
 * reason to keep a laptop awake, and a clipboard holding a secret must not
 * outlive a suspend, so the helper is ended (its SIGTERM handler clears the
 * clipboard) instead. docs/suspend.md states this exception to the spec.
 */
export const SUSPEND_CLEARED_KINDS: ReadonlySet<string> = new Set<ActivityKind>(['form']);

/** Most activities held at once; a registration beyond this is refused (ACTIVITY_LIMIT). */
export const MAX_ACTIVITIES = 256;
/** Longest grace terminateAll accepts; logind gives the whole suspend 5 s. */
export const MAX_GRACE_MS = 30_000;

export type ActivityErrorCode =
  | 'ACTIVITY_UNKNOWN_KIND'
  | 'ACTIVITY_NOT_DESCENDANT'
  | 'ACTIVITY_NO_PROCESS'
  | 'ACTIVITY_BAD_TOKEN'
  | 'ACTIVITY_LIMIT';

export class ActivityError extends StashError {
  declare readonly code: ActivityErrorCode;
  constructor(code: ActivityErrorCode, message: string) {
    super(code, message);
  }
}

interface Entry {
  pid: number;
  kind: ActivityKind;
  startTime: string;
  tokenHash: Buffer;
  registeredAt: number;
}

export interface ActivityRegistryOptions {
  /** Called with the distinct kinds (in ACTIVITY_KINDS order) whenever that set changes; [] when the last one goes. */
  onChange(kinds: ActivityKind[]): void;
  /** Clock for ageMs (ms). Default Date.now. */
  now?: () => number;
  /** Default MAX_ACTIVITIES. */
  maxEntries?: number;
}

const tokenPattern = /^[0-9a-f]{32}$/;
const kindSet: ReadonlySet<string> = new Set(ACTIVITY_KINDS);

// sodium, which the agent has loaded anyway, not node:crypto: loading that took about 4 ms of each agent start.
function hashToken(token: Buffer): Buffer {
  const hash = Buffer.alloc(32);
  loadSodium().crypto_hash_sha256(hash, token);
  return hash;
}

function randomToken(): Buffer {
  const token = Buffer.alloc(16);
  loadSodium().randombytes_buf(token);
  return token;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class ActivityRegistry {
  private entries: Entry[] = [];
  private lastKinds: ActivityKind[] = [];
  private readonly onChange: (kinds: ActivityKind[]) => void;
  private readonly now: () => number;
  private readonly maxEntries: number;
  private readonly read: (pid: number) => ProcInfo | null = readProcInfo;

  constructor(opts: ActivityRegistryOptions) {
    this.onChange = opts.onChange;
    this.now = opts.now ?? Date.now;
    this.maxEntries = opts.maxEntries ?? MAX_ACTIVITIES;
  }

  /**
   * Registers `pid` (the connected peer itself or one of its descendants) as a
   * running activity of `kind`. Returns the token that unregister needs.
   * @throws ActivityError ACTIVITY_UNKNOWN_KIND, ACTIVITY_NO_PROCESS, ACTIVITY_NOT_DESCENDANT, ACTIVITY_LIMIT
   */
  register(peerPid: number, pid: number, kind: string): string {
    if (!kindSet.has(kind)) {
      throw new ActivityError(
        'ACTIVITY_UNKNOWN_KIND',
        `unknown activity kind ${JSON.stringify(kind.slice(0, 32))}; expected one of ${ACTIVITY_KINDS.join(', ')}`,
      );
    }
    if (!Number.isInteger(pid) || pid <= 0)
      throw new ActivityError('ACTIVITY_NO_PROCESS', `not a process id: ${String(pid)}`);
    if (!Number.isInteger(peerPid) || peerPid <= 0)
      throw new ActivityError('ACTIVITY_NOT_DESCENDANT', 'the caller has no process id');
    if (this.entries.length >= this.maxEntries) this.prune();
    if (this.entries.length >= this.maxEntries) {
      throw new ActivityError('ACTIVITY_LIMIT', `too many running activities (${this.maxEntries})`);
    }
    const before = this.read(pid);
    if (before === null || before.zombie) throw new ActivityError('ACTIVITY_NO_PROCESS', `no running process ${pid}`);
    if (pid !== peerPid && !isSelfOrDescendant(pid, peerPid, this.read)) {
      throw new ActivityError(
        'ACTIVITY_NOT_DESCENDANT',
        `process ${pid} is neither the caller (${peerPid}) nor one of its descendants`,
      );
    }
    // The ancestry walk took time: make sure it was about the same process.
    if (!isSameProcess(pid, before.startTime, this.read))
      throw new ActivityError('ACTIVITY_NO_PROCESS', `process ${pid} exited`);
    const token = randomToken();
    const text = token.toString('hex');
    this.entries.push({
      pid,
      kind: kind as ActivityKind,
      startTime: before.startTime,
      tokenHash: hashToken(token),
      registeredAt: this.now(),
    });
    token.fill(0);
    this.changed();
    return text;
  }

  /**
   * Ends the activity of `pid` that `token` was issued for.
   * @throws ActivityError ACTIVITY_BAD_TOKEN (malformed, unknown, or for another pid)
   */
  unregister(pid: number, token: string): void {
    if (typeof token !== 'string' || !tokenPattern.test(token))
      throw new ActivityError('ACTIVITY_BAD_TOKEN', 'malformed activity token');
    const raw = Buffer.from(token, 'hex');
    const hash = hashToken(raw);
    raw.fill(0); // the token's bytes do not linger in node's shared Buffer pool
    let match = -1;
    // Compare against every entry of the pid, without an early exit.
    this.entries.forEach((entry, index) => {
      if (entry.pid === pid && loadSodium().sodium_memcmp(entry.tokenHash, hash) && match < 0) match = index;
    });
    if (match < 0) throw new ActivityError('ACTIVITY_BAD_TOKEN', `no activity of process ${pid} with this token`);
    this.entries.splice(match, 1);
    this.changed();
  }

  /** The registered activities, oldest first. */
  list(): Array<{ pid: number; kind: ActivityKind; ageMs: number }> {
    const now = this.now();
    return this.entries.map((e) => ({ pid: e.pid, kind: e.kind, ageMs: Math.max(0, now - e.registeredAt) }));
  }

  /** Drops activities whose process exited or whose pid now names another process. Returns how many. */
  prune(): number {
    const before = this.entries.length;
    this.entries = this.entries.filter((e) => isSameProcess(e.pid, e.startTime, this.read));
    const removed = before - this.entries.length;
    if (removed > 0) this.changed();
    return removed;
  }

  /**
   * Suspend with terminate-on-suspend: SIGTERM to every registered process,
   * SIGKILL after `graceMs` to those still running, then the registry forgets
   * them. The start time is re-checked before every signal, so a recycled pid
   * is never signalled (it counts as skipped), and the agent never signals
   * itself. A signal the kernel refuses (EPERM: say, `stash env -- sudo ...`
   * registered a child that became root) counts as failed and does not stop
   * the others from being signalled. With `only`, just the activities whose
   * kind it accepts are signalled and forgotten; the others stay registered.
   */
  async terminateAll(
    graceMs: number,
    only?: (kind: ActivityKind) => boolean,
  ): Promise<{ terminated: number; killed: number; skipped: number; failed: number }> {
    const grace = Number.isFinite(graceMs) ? Math.min(Math.max(0, graceMs), MAX_GRACE_MS) : 0;
    const seen = new Set<string>();
    const targets: Entry[] = [];
    const before = new Set(only ? this.entries.filter((e) => only(e.kind)) : this.entries);
    for (const e of before) {
      const key = `${e.pid}:${e.startTime}`;
      if (!seen.has(key)) {
        seen.add(key);
        targets.push(e);
      }
    }
    const send = (e: Entry, signal: NodeJS.Signals): SignalResult | 'failed' => {
      try {
        return signalIfSame(e.pid, e.startTime, signal);
      } catch {
        return 'failed';
      }
    };
    let skipped = 0;
    let failed = 0;
    let killed = 0;
    try {
      let signalled: Entry[] = [];
      for (const e of targets) {
        const r = e.pid === process.pid ? 'gone' : send(e, 'SIGTERM');
        if (r === 'gone') skipped++;
        else if (r === 'failed') failed++;
        else signalled.push(e);
      }
      const deadline = Date.now() + grace;
      while (signalled.length > 0 && Date.now() < deadline) {
        await sleep(Math.min(20, Math.max(1, deadline - Date.now())));
        signalled = signalled.filter((e) => isSameProcess(e.pid, e.startTime, this.read));
      }
      for (const e of signalled) {
        const r = send(e, 'SIGKILL');
        if (r === 'signalled') killed++;
        else if (r === 'failed') failed++;
      }
    } finally {
      // Only what was registered when this began: nothing may register meanwhile (the agent refuses it while
      // suspending), but if it did, it would stay tracked rather than vanish unsignalled.
      this.entries = this.entries.filter((e) => !before.has(e));
      if (before.size > 0) this.changed();
    }
    return { terminated: targets.length - skipped - killed - failed, killed, skipped, failed };
  }

  get size(): number {
    return this.entries.length;
  }

  /** Forgets every activity (no signals). */
  clear(): void {
    if (this.entries.length === 0) return;
    this.entries = [];
    this.changed();
  }

  /**
   * TEST ONLY: overwrites the recorded start time of `pid`'s entries, which is
   * what a pid reused by a new process looks like to the registry. There is no
   * other way to make the kernel recycle a chosen pid inside a test.
   */
  _testSetStartTime(pid: number, startTime: string): void {
    for (const e of this.entries) if (e.pid === pid) e.startTime = startTime;
  }

  private changed(): void {
    const present = new Set(this.entries.map((e) => e.kind));
    const kinds = ACTIVITY_KINDS.filter((k) => present.has(k));
    if (kinds.length === this.lastKinds.length && kinds.every((k, i) => k === this.lastKinds[i])) return;
    this.lastKinds = kinds;
    this.onChange([...kinds]);
  }
}
