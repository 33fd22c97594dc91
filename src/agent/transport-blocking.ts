/**
 * The blocking transport (src/agent/transport.ts): the addon's connect, send
 * and poll-bounded receive on the JS thread, for a short-lived command on
 * Linux or macOS. A request is answered before request() returns its
 * (already settled) promise, so requests cannot overlap. Only the sealed
 * channel's ciphertext, or plain status frames, pass through its buffers.
 */
import { FrameDecoder, type Frame } from '../protocol/index.js';
import { loadBinding, type NativeBinding } from '../native/binding.js';
import { errorCode, errorMessage } from '../errors.js';
import { AgentError, unreadableReply } from './agent-error.js';
import type { Transport } from './transport.js';
import type { Endpoint } from './paths.js';

export type SyncSocket = Required<
  Pick<
    NativeBinding,
    'unixConnect' | 'socketSend' | 'socketReceive' | 'socketPeerClosed' | 'closeFd' | 'peerCredentials'
  >
>;

/** The addon's blocking socket calls; null when the addon does not load or lacks them (Windows, an older addon). */
export function syncSocket(): SyncSocket | null {
  let b: NativeBinding;
  try {
    b = loadBinding();
  } catch {
    return null;
  }
  if (!b.unixConnect || !b.socketSend || !b.socketReceive || !b.socketPeerClosed || !b.closeFd) return null;
  return b as SyncSocket;
}

/** One receive reads at most this much; a reply is rarely more than a few hundred bytes. */
const RECEIVE_BYTES = 16 * 1024;

class BlockingTransport implements Transport {
  readonly kind = 'blocking' as const;
  private readonly decoder = new FrameDecoder();
  private readonly receiveBuffer = Buffer.allocUnsafe(RECEIVE_BYTES);
  private fd: number;
  private failure: AgentError | null = null;

  constructor(
    private readonly io: SyncSocket,
    fd: number,
    private readonly endpoint: Endpoint,
    private readonly replyTimeoutMs: number,
  ) {
    this.fd = fd;
  }

  request(wire: Buffer): Promise<Frame> {
    try {
      return Promise.resolve(this.exchange(wire));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private fail(err: AgentError): never {
    this.failure ??= err;
    this.release();
    throw this.failure;
  }

  private exchange(wire: Buffer): Frame {
    if (this.failure) throw this.failure;
    try {
      this.io.socketSend(this.fd, wire);
    } catch (err) {
      this.fail(new AgentError('AGENT_UNAVAILABLE', `agent connection failed: ${errorMessage(err)}`));
    }
    const deadline = Date.now() + this.replyTimeoutMs;
    for (;;) {
      let frame: Frame | null;
      try {
        frame = this.decoder.next();
      } catch (err) {
        this.fail(unreadableReply(this.endpoint, err));
      }
      if (frame) return frame;
      let n: number;
      try {
        n = this.io.socketReceive(this.fd, this.receiveBuffer, Math.max(0, deadline - Date.now()));
      } catch (err) {
        if (errorCode(err) === 'ETIMEDOUT') {
          this.fail(new AgentError('AGENT_UNAVAILABLE', `the agent did not answer within ${this.replyTimeoutMs} ms`));
        }
        this.fail(new AgentError('AGENT_UNAVAILABLE', `agent connection failed: ${errorMessage(err)}`));
      }
      if (n === 0) this.fail(new AgentError('AGENT_UNAVAILABLE', 'the agent closed the connection'));
      // The decoder keeps what it is given: hand it a copy, the receive buffer is reused.
      this.decoder.push(Buffer.from(this.receiveBuffer.subarray(0, n)));
    }
  }

  closedWhileIdle(): boolean {
    if (this.failure || this.fd < 0) return false;
    try {
      return this.io.socketPeerClosed(this.fd);
    } catch {
      return true;
    }
  }

  peerUid(): number {
    if (this.fd < 0) throw new AgentError('AGENT_UNAVAILABLE', 'the agent connection was closed');
    return this.io.peerCredentials(this.fd).uid;
  }

  private release(): void {
    this.decoder.clear();
    if (this.fd >= 0) this.io.closeFd(this.fd);
    this.fd = -1;
  }

  close(): void {
    this.failure ??= new AgentError('AGENT_UNAVAILABLE', 'the agent connection was closed');
    this.release();
  }
}

/** Connects at once (a Unix socket connects or fails without waiting). Throws the system error, its `code` kept. */
export function openBlockingTransport(io: SyncSocket, endpoint: Endpoint, replyTimeoutMs: number): Transport {
  return new BlockingTransport(io, io.unixConnect(endpoint.path), endpoint, replyTimeoutMs);
}
