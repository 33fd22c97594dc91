/**
 * The event-loop transport (src/agent/transport.ts): a node:net socket, or on
 * Windows the addon's verified named-pipe connection wrapped in one. Replies
 * come back in request order, so each is matched to the oldest pending request.
 */
import { connect, type Socket } from 'node:net';
import { peerCredentials } from '../native/index.js';
import { FrameDecoder, type Frame } from '../protocol/index.js';
import { AgentError, unreadableReply } from './agent-error.js';
import type { Transport } from './transport.js';
import type { Endpoint } from './paths.js';

type Pending = { resolve: (f: Frame) => void; reject: (e: Error) => void };

class NetTransport implements Transport {
  readonly kind = 'net' as const;
  private readonly decoder = new FrameDecoder();
  private readonly pending: Pending[] = [];
  private failure: Error | null = null;
  private idleClose = false;
  private closing = false;

  constructor(
    private readonly socket: Socket,
    private readonly endpoint: Endpoint,
  ) {
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) =>
      this.failAll(new AgentError('AGENT_UNAVAILABLE', `agent connection failed: ${e.message}`)),
    );
    socket.on('close', () => {
      if (this.failure === null && this.pending.length === 0 && !this.closing) this.idleClose = true;
      this.failAll(new AgentError('AGENT_UNAVAILABLE', 'the agent closed the connection'));
    });
  }

  private onData(data: Buffer): void {
    try {
      this.decoder.push(data);
      for (let f = this.decoder.next(); f; f = this.decoder.next()) {
        const p = this.pending.shift();
        if (p) p.resolve(f);
      }
    } catch (err) {
      this.failAll(unreadableReply(this.endpoint, err));
      this.socket.destroy();
    }
  }

  private failAll(err: Error): void {
    this.failure ??= err;
    for (const p of this.pending.splice(0)) p.reject(err);
  }

  request(wire: Buffer): Promise<Frame> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      this.socket.write(wire);
    });
  }

  closedWhileIdle(): boolean {
    return this.idleClose;
  }

  peerUid(): number | null {
    if (process.platform === 'win32') return null;
    return peerCredentials(this.socket).uid;
  }

  close(): void {
    this.closing = true;
    this.idleClose = false;
    this.decoder.clear();
    this.socket.end();
    this.socket.unref();
  }
}

function connectSocket(endpoint: Endpoint, timeoutMs: number): Promise<Socket> {
  if (process.platform === 'win32') {
    // The pipe namespace is machine-wide: connect natively and only to a server running as us (windows-pipe.ts).
    return import('./windows-pipe.js').then((m) => m.connectWindowsPipe(endpoint.path, timeoutMs));
  }
  return new Promise((resolve, reject) => {
    const socket = connect(endpoint.path);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(Object.assign(new Error(`timed out connecting to ${endpoint.path}`), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export async function openNetTransport(endpoint: Endpoint, timeoutMs: number): Promise<Transport> {
  return new NetTransport(await connectSocket(endpoint, timeoutMs), endpoint);
}
