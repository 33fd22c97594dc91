/**
 * No power backend: an unsupported platform, or the native addon is missing.
 * Everything is a no-op and status() says why; the agent still works, without
 * suspend protection.
 */
import { PowerIntegration, type PowerOptions } from './power-integration.js';

export class NullPowerIntegration extends PowerIntegration {
  readonly backend = 'none' as const;
  private readonly why: string;

  constructor(why: string, opts: PowerOptions = {}) {
    super(opts);
    this.why = why;
  }

  protected async open(): Promise<void> {
    this.available = false;
    this.listener = 'unavailable';
    this.reason = this.why;
    this.log('warning', `suspend protection unavailable: ${this.why}`);
  }

  protected close(): void {}

  protected delayLockState(): { held: boolean; reason: string | null } {
    return { held: false, reason: this.why };
  }

  protected canBlock(): boolean {
    return false;
  }

  protected acquireBlock(): Promise<number> {
    return Promise.reject(new Error(this.why));
  }

  protected releaseBlock(): void {}
}
