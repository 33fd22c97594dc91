/**
 * The message channel between the store's process and a fetch process: the
 * IPC pipe node sets up with fork() (structured clone, 'advanced'
 * serialization: Buffers, typed arrays and plain objects travel as they
 * are). Calls carry an id and get one answer; notes get none. Failures
 * travel as their stable code and the message the caller may see: a
 * StashError is rebuilt on the other side with the same code (and Retry-After
 * and limit for a 429), so both processes answer a failure with the same
 * bytes; anything else is logged where it happened and travels as INTERNAL.
 */
import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { StashError } from '../../errors.js';
import { KeyServerError, RateLimitedError, type LimitName } from '../errors.js';
import type { Logger } from '../logger.js';

/** What is sent: a call, its answer, or a note (no answer); `socket` hands over a connection. */
export type Message =
  | { k: 'call'; id: number; m: string; p: unknown }
  | { k: 'ok'; id: number; v: unknown }
  | { k: 'err'; id: number; e: WireError }
  | { k: 'note'; m: string; p: unknown }
  | { k: 'socket' };

export interface WireError {
  code: string;
  message: string;
  retryAfter?: number;
  limit?: LimitName;
}

/** The failure as it may be shown to the caller of the other process. */
export function toWire(err: unknown, logger: Logger): WireError {
  if (err instanceof StashError && err.expose && err.code !== 'INTERNAL') {
    if (err instanceof RateLimitedError)
      return {
        code: err.code,
        message: err.message,
        retryAfter: err.retryAfter,
        ...(err.limit ? { limit: err.limit } : {}),
      };
    return { code: err.code, message: err.message };
  }
  logger.error(`internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  return { code: 'INTERNAL', message: 'internal server error' };
}

export function fromWire(e: WireError): KeyServerError {
  if (e.code === 'RATE_LIMITED') return new RateLimitedError(e.message, e.retryAfter ?? 1, e.limit);
  return new KeyServerError(e.code, e.message, { expose: e.code !== 'INTERNAL' });
}

type Port = ChildProcess | NodeJS.Process;
export type Handlers = Record<string, (payload: never) => unknown>;

/**
 * Calls and notes over one IPC channel. `handlers` answer the other side's
 * calls and notes by name; a call the channel closes under is rejected with
 * `closedError()`.
 */
export class Channel {
  private nextId = 1;
  private readonly pending = new Map<number, { ok: (v: unknown) => void; fail: (e: Error) => void }>();
  private open = true;

  constructor(
    private readonly port: Port,
    private readonly handlers: Handlers,
    private readonly logger: Logger,
    private readonly closedError: () => Error,
    private readonly onSocket?: (socket: Socket) => void,
  ) {
    port.on('message', (msg: Message, handle?: Socket) => this.receive(msg, handle));
    port.on('disconnect', () => this.close());
  }

  get connected(): boolean {
    return this.open && this.port.connected === true;
  }

  /** Answers the other side's calls and notes of `method` with `handler` from now on. */
  handle(method: string, handler: (payload: never) => unknown): void {
    this.handlers[method] = handler;
  }

  /** Calls `method` on the other side; resolves with its answer. */
  call<T>(method: string, payload: unknown): Promise<T> {
    if (!this.connected) return Promise.reject(this.closedError());
    const id = this.nextId++;
    return new Promise<T>((ok, fail) => {
      this.pending.set(id, { ok: ok as (v: unknown) => void, fail });
      this.send({ k: 'call', id, m: method, p: payload });
    });
  }

  /** Sends a note (no answer); dropped when the channel is closed. */
  note(method: string, payload: unknown): void {
    if (this.connected) this.send({ k: 'note', m: method, p: payload });
  }

  /** Hands a connection over to the other side (the store's process to a fetch process). */
  sendSocket(socket: Socket, done: (err: Error | null) => void): void {
    (this.port as ChildProcess).send({ k: 'socket' } satisfies Message, socket, { keepOpen: false }, done);
  }

  /** Rejects every call in flight. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    for (const p of this.pending.values()) p.fail(this.closedError());
    this.pending.clear();
  }

  private send(msg: Message): void {
    // A channel that closes between the check and the write reports it here: the 'disconnect' handler settles the rest.
    this.port.send!(msg, undefined, undefined, (err: Error | null) => {
      if (err && msg.k === 'call') {
        const p = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        p?.fail(this.closedError());
      }
    });
  }

  private receive(msg: Message, handle: Socket | undefined): void {
    switch (msg.k) {
      case 'ok':
      case 'err': {
        const p = this.pending.get(msg.id);
        if (!p) return;
        this.pending.delete(msg.id);
        if (msg.k === 'ok') p.ok(msg.v);
        else p.fail(fromWire(msg.e));
        return;
      }
      case 'socket':
        if (handle && this.onSocket) this.onSocket(handle);
        else handle?.destroy();
        return;
      case 'note':
      case 'call': {
        const handler = this.handlers[msg.m];
        if (msg.k === 'note') {
          if (handler) this.run(() => handler(msg.p as never));
          return;
        }
        const id = msg.id;
        const answer = (m: Message) => {
          if (this.connected) this.send(m);
        };
        if (!handler) {
          answer({ k: 'err', id, e: toWire(new Error(`no handler for ${msg.m}`), this.logger) });
          return;
        }
        let result: unknown;
        try {
          result = handler(msg.p as never);
        } catch (err) {
          answer({ k: 'err', id, e: toWire(err, this.logger) });
          return;
        }
        Promise.resolve(result).then(
          (v) => answer({ k: 'ok', id, v }),
          (err: unknown) => answer({ k: 'err', id, e: toWire(err, this.logger) }),
        );
      }
    }
  }

  private run(f: () => unknown): void {
    try {
      const r = f();
      if (r instanceof Promise) r.catch((err: unknown) => toWire(err, this.logger));
    } catch (err) {
      toWire(err, this.logger);
    }
  }
}
