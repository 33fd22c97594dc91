/**
 * How AgentClient reaches the agent: one connection that sends request frames
 * and gives back reply frames, in order. Two kinds:
 *
 * - `net`: a node:net socket (a named pipe on Windows), driven by the event
 *   loop. Any number of requests may be in flight. Used by long-lived callers
 *   (tests, benchmarks, a process that also serves something) and on Windows.
 * - `blocking`: the addon's plain system calls on the JS thread (Linux and
 *   macOS, native/common/sync_socket_posix.cc): send, then wait for the reply,
 *   bounded by a reply timeout. A short-lived command (`stash get`) then loads
 *   neither node:net nor the stream machinery under it. The process does
 *   nothing else while it waits, so it must never be used by a process that
 *   serves the agent itself, or anything else, on its own event loop.
 *
 * `auto` is `blocking` where the addon offers it, else `net`. The CLI uses
 * `auto` unless STASH_AGENT_TRANSPORT says otherwise (docs/configuration.md).
 */
import type { Frame } from '../protocol/index.js';
import { ConfigError } from '../errors.js';
import type { Endpoint } from './paths.js';

export type TransportKind = 'net' | 'blocking';
export type TransportChoice = TransportKind | 'auto';

export interface Transport {
  readonly kind: TransportKind;
  /** Sends one request frame; resolves with its reply frame. Rejects with AgentError; after a failure every request does. */
  request(wire: Buffer): Promise<Frame>;
  /** True when the agent closed the connection while no request was in flight (its idle timeout): open a new one. */
  closedWhileIdle(): boolean;
  /**
   * The uid of the process at the other end, as the kernel reports it
   * (SO_PEERCRED, getpeereid); null on Windows, where the pipe connection
   * already checked the server's user (windows-pipe.ts). Throws when the
   * addon cannot tell.
   */
  peerUid(): number | null;
  close(): void;
}

export interface TransportOptions {
  transport?: TransportChoice | undefined;
  /** Connect timeout. */
  timeoutMs?: number;
  /** blocking: how long to wait for one reply before the connection is given up (default 10 s). */
  replyTimeoutMs?: number | undefined;
}

export const DEFAULT_REPLY_TIMEOUT_MS = 10_000;

/** STASH_AGENT_TRANSPORT: `auto` (unset or empty), `blocking` or `net`; anything else is a config error. */
export function transportChoice(env: NodeJS.ProcessEnv = process.env): TransportChoice {
  const raw = env.STASH_AGENT_TRANSPORT;
  if (raw === undefined || raw === '' || raw === 'auto') return 'auto';
  if (raw === 'net' || raw === 'blocking') return raw;
  throw new ConfigError(
    `STASH_AGENT_TRANSPORT must be auto, blocking or net; got ${JSON.stringify(raw.slice(0, 40))}`,
    'STASH_AGENT_TRANSPORT',
  );
}

/**
 * Connects to the agent at `endpoint`. Rejects with the system error (its
 * `code`: ENOENT, ECONNREFUSED, ...) when nothing answers, as node:net does.
 */
export async function openTransport(endpoint: Endpoint, opts: TransportOptions = {}): Promise<Transport> {
  const choice = opts.transport ?? 'net';
  if (choice !== 'net' && process.platform !== 'win32') {
    const { openBlockingTransport, syncSocket } = await import('./transport-blocking.js');
    const io = syncSocket();
    if (io) return openBlockingTransport(io, endpoint, opts.replyTimeoutMs ?? DEFAULT_REPLY_TIMEOUT_MS);
  }
  if (choice === 'blocking') {
    // A configuration error, not "no agent": `vault sessions lock` must not report nothing to lock.
    throw new ConfigError(
      'STASH_AGENT_TRANSPORT=blocking needs the stash native addon (Linux or macOS); set STASH_AGENT_TRANSPORT=auto or net',
      'STASH_AGENT_TRANSPORT',
    );
  }
  const { openNetTransport } = await import('./transport-net.js');
  return openNetTransport(endpoint, opts.timeoutMs ?? 2000);
}
