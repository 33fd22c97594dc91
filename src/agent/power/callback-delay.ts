/**
 * Shared by macOS and Windows, where the OS announces sleep through a callback
 * and waits for the application to answer: the unanswered notification IS the
 * delay lock (there is nothing to take up front), and the answer is
 * watcher.allowSleep(id) after the wipe. The block lock is an IOPM assertion
 * (macOS) or a power request (Windows), both taken through powerInhibit(...,
 * 'block') and released through powerRelease.
 */
import {
  powerInhibit,
  powerProbe,
  powerRelease,
  watchPower,
  type NativePowerEvent,
  type NativePowerWatcher,
} from '../../native/power.js';
import { PowerIntegration } from './power-integration.js';

export abstract class CallbackDelayPowerIntegration extends PowerIntegration {
  private watcher: NativePowerWatcher | null = null;

  protected async open(): Promise<void> {
    const probe = await powerProbe();
    this.library = probe.library;
    if (!probe.available) {
      this.available = false;
      this.listener = 'unavailable';
      this.reason = probe.reason ?? 'the power backend is not available';
      this.log('warning', `suspend protection unavailable: ${this.reason}`);
      return;
    }
    if (this.stopped) return;
    await new Promise<void>((resolve) => {
      this.watcher = watchPower((event) => {
        this.onEvent(event);
        if (event.type === 'ready' || event.type === 'error') resolve();
      });
    });
  }

  protected close(): void {
    this.watcher?.stop();
    this.watcher = null;
  }

  protected delayLockState(): { held: boolean; reason: string | null } {
    if (this.listener !== 'running') return { held: false, reason: this.reason ?? 'listener not running' };
    if (this.phase !== 'idle') return { held: false, reason: 'released for suspend' };
    return { held: true, reason: null };
  }

  protected canBlock(): boolean {
    return this.available && !this.stopped;
  }

  protected acquireBlock(why: string): Promise<number> {
    return powerInhibit({ what: 'sleep', who: this.opts.who, why: `${this.opts.who}: ${why}`, mode: 'block' });
  }

  protected releaseBlock(handle: number): void {
    powerRelease(handle);
  }

  private onEvent(event: NativePowerEvent): void {
    if (this.stopped) return;
    switch (event.type) {
      case 'ready':
        this.listener = 'running';
        this.available = true;
        this.reason = null;
        void this.reconcileBlock();
        break;
      case 'sleep':
        if (event.start) {
          const id = event.id ?? 0;
          void this.handleSleep(() => {
            this.watcher?.allowSleep(id);
          });
        } else {
          this.handleResume();
        }
        break;
      case 'error':
        this.watcher?.stop();
        this.watcher = null;
        this.available = false;
        this.listener = 'unavailable';
        this.reason = `${event.message} (${event.code})`;
        this.dropBlock();
        this.log('error', `suspend listener failed: ${this.reason}`);
        break;
      default:
        this.log('warning', `unexpected power event: ${JSON.stringify(event)}`);
    }
  }
}
