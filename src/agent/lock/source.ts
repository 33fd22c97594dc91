/**
 * One lock source of the session lock (src/agent/lock/session-lock.ts): the
 * native watcher of that source, started again with backoff when it fails
 * (no bus yet, logind restarting, the session bus gone), its owners, and what
 * it said last. Its events go to the integration, which holds the policy.
 */
import { errorMessage } from '../../errors.js';
import {
  watchSessionLock,
  type LockSourceName,
  type NativeLockEvent,
  type NativeLockWatcher,
} from '../../native/session-lock.js';

export interface LockSourceStatus {
  source: LockSourceName;
  /** 'watching': the listener runs; 'unavailable': it failed and retries (see reason). */
  state: 'starting' | 'watching' | 'unavailable' | 'stopped';
  /** True when a lock can be seen through it now (a screensaver source also needs a screensaver on the bus). */
  available: boolean;
  /** What it watches: the logind session object, the bus names with their owners. */
  watching: string | null;
  reason: string | null;
  /** Its last word: locked (true), unlocked (false), not known (null). */
  locked: boolean | null;
}

export interface LockSourceOptions {
  sessionId: string | null;
  retryMinMs: number;
  retryMaxMs: number;
  /** macOS: how often the main run loop is serviced (distributed notifications arrive only there); null elsewhere. */
  pumpMs: number | null;
  onEvent(event: NativeLockEvent): void;
  log(level: 'info' | 'warning', message: string): void;
}

export class LockSource {
  private watcher: NativeLockWatcher | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private pumpTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private stopped = false;
  private state: LockSourceStatus['state'] = 'starting';
  private reason: string | null = null;
  private session: string | null = null;
  /** Bus name -> unique name of its owner ('' while nobody owns it). */
  private readonly owners = new Map<string, string>();
  locked: boolean | null = null;

  constructor(
    readonly name: LockSourceName,
    private readonly opts: LockSourceOptions,
  ) {
    this.retryMs = opts.retryMinMs;
  }

  start(): void {
    if (this.stopped || this.watcher) return;
    try {
      // Events from a watcher that was replaced or stopped are stale.
      const watcher: NativeLockWatcher = watchSessionLock(this.name, this.opts.sessionId, (event) => {
        if (this.watcher === watcher && !this.stopped) this.onEvent(event);
      });
      this.watcher = watcher;
    } catch (err) {
      // No sd-bus library or no such source in this addon: nothing changes while the process lives.
      this.state = 'unavailable';
      this.reason = errorMessage(err);
      this.opts.log('warning', `session lock source ${this.name} unavailable: ${this.reason}`);
      return;
    }
    if (this.opts.pumpMs !== null && !this.pumpTimer) {
      this.pumpTimer = setInterval(() => this.watcher?.pump(), this.opts.pumpMs);
      // Servicing the run loop must not keep an otherwise finished agent alive.
      this.pumpTimer.unref();
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.pumpTimer) clearInterval(this.pumpTimer);
    this.retryTimer = this.pumpTimer = null;
    this.watcher?.stop();
    this.watcher = null;
    this.state = 'stopped';
  }

  status(): LockSourceStatus {
    const owned = [...this.owners].filter(([, owner]) => owner !== '');
    const watching =
      this.name === 'screensaver'
        ? this.owners.size === 0
          ? null
          : [...this.owners].map(([n, o]) => `${n} (${o === '' ? 'no owner' : o})`).join(', ')
        : this.name === 'wts' && this.session !== null
          ? `session ${this.session}`
          : this.session;
    // A bus source sees a lock only while someone owns the name it listens to.
    const owner =
      this.name === 'screensaver'
        ? owned.length > 0
        : this.name === 'logind'
          ? (this.owners.get('org.freedesktop.login1') ?? '') !== ''
          : true;
    const available = this.state === 'watching' && owner;
    let reason = this.state === 'watching' ? null : this.reason;
    if (this.state === 'watching' && !owner) {
      reason =
        this.name === 'screensaver'
          ? 'no screensaver on the session bus owns org.freedesktop.ScreenSaver or org.gnome.ScreenSaver'
          : 'org.freedesktop.login1 left the system bus (systemd-logind/elogind not running)';
    }
    return { source: this.name, state: this.state, available, watching, reason, locked: this.locked };
  }

  private onEvent(event: NativeLockEvent): void {
    switch (event.type) {
      case 'ready':
        if (this.state !== 'watching' && this.reason !== null)
          this.opts.log('info', `session lock source ${this.name} is back`);
        this.state = 'watching';
        this.reason = null;
        this.retryMs = this.opts.retryMinMs;
        this.session = event.session;
        if (event.owner !== null && this.name === 'logind') this.owners.set('org.freedesktop.login1', event.owner);
        break;
      case 'owner': {
        const before = this.owners.get(event.name);
        this.owners.set(event.name, event.owner ?? '');
        if (before !== undefined && before !== (event.owner ?? '')) {
          this.opts.log('info', event.owner ? `${event.name} is now ${event.owner}` : `${event.name} left the bus`);
        }
        break;
      }
      case 'error':
        this.failed(`${event.message} (${event.code})`);
        return;
      default:
        break;
    }
    if (event.type === 'lock') this.locked = event.locked;
    if (event.type === 'ready') this.locked = event.locked;
    this.opts.onEvent(event);
  }

  /** The watcher stopped: say so once per reason, and start it again later. */
  private failed(message: string): void {
    this.watcher?.stop();
    this.watcher = null;
    if (this.reason !== message)
      this.opts.log('warning', `session lock source ${this.name} stopped: ${message}; retrying`);
    this.state = 'unavailable';
    this.reason = message;
    this.locked = null;
    this.owners.clear();
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.start();
    }, this.retryMs);
    // Retrying must not keep an otherwise finished agent alive.
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, this.opts.retryMaxMs);
  }
}
