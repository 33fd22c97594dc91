/**
 * One client connection of the agent: framing, the secure channel, and the
 * dispatch of each request to the agent's handlers. Errors become ERROR
 * replies; only a connection whose framing can no longer be trusted is closed.
 */
import type { Socket } from 'node:net';
import {
  decodeRequest, encodeFrame, encodeReply, ephemeralKeys, FrameDecoder, MsgType, PROTOCOL_VERSION, ProtocolError,
  MAX_KEY_BYTES, SEALED_ONLY, SecureChannel, SecureScratch, typeName, type Frame, type OpenedFrame, type Reply, type Request,
} from '../protocol/index.js';
import { StashError } from '../errors.js';

/** What a connection needs from the agent. */
export interface RequestHandler {
  /**
   * Handles one decoded request. `peerPid` is the kernel-reported client pid (null on Windows).
   * A CACHE_KEY reply's key goes in `keyMemory(length)` (secure memory the connection zeroes after sealing).
   */
  handle(req: Request, peerPid: number | null, sealed: boolean, keyMemory?: (length: number) => Buffer): Reply | Promise<Reply>;
  /** Called after a stop request's ack was written. */
  stopRequested(): void;
  log(level: 'info' | 'warning' | 'error', message: string): void;
}

/** StashError codes of domain errors mapped onto protocol error numbers. */
const domainErrors: Record<string, ProtocolError['protocolCode']> = {
  CACHE_FULL: 10,
  ACTIVITY_UNKNOWN_KIND: 7,
  ACTIVITY_BAD_TOKEN: 8,
  ACTIVITY_NOT_DESCENDANT: 9,
  ACTIVITY_LIMIT: 16,
  ACTIVITY_NO_PROCESS: 17,
};

/** The ERROR reply for `err`; an unexpected error is answered as INTERNAL and its message goes to `logInternal`. */
function errorReply(err: unknown, logInternal: (message: string) => void): Reply {
  if (err instanceof ProtocolError) return { type: 'error', code: err.protocolCode, message: err.message };
  if (err instanceof StashError && domainErrors[err.code] !== undefined) {
    return { type: 'error', code: domainErrors[err.code]!, message: err.message };
  }
  logInternal(`internal error answered as INTERNAL (18): ${err instanceof Error ? err.message : String(err)}`);
  return { type: 'error', code: 18, message: 'internal agent error' };
}

export class AgentConnection {
  private readonly decoder = new FrameDecoder();
  private channel: SecureChannel | null = null;
  /** Where the handler copies a cached key for the reply: reused, zeroed after each sealing, freed on close. */
  private readonly keyScratch = new SecureScratch(MAX_KEY_BYTES);
  private readonly keyMemory = (length: number): Buffer => this.keyScratch.take(length);
  private readonly replyFor = (err: unknown): Reply => errorReply(err, (m) => this.handler.log('error', m));
  /** Frames (or a framing failure) not yet handled; requests are answered strictly in order. */
  private readonly backlog: Array<Frame | { failure: unknown }> = [];
  /** True while an asynchronous request is in flight: later frames wait in the backlog. */
  private waiting = false;
  private closed = false;

  constructor(
    private readonly socket: Socket,
    private readonly peerPid: number | null,
    private readonly handler: RequestHandler,
  ) {
    socket.on('data', (data: Buffer) => this.onData(data));
    socket.on('close', () => this.dispose());
    socket.on('error', () => this.dispose());
  }

  private onData(data: Buffer): void {
    if (this.closed) return;
    try {
      this.decoder.push(data);
      for (let frame = this.decoder.next(); frame; frame = this.decoder.next()) this.backlog.push(frame);
    } catch (err) {
      this.backlog.push({ failure: err });
    }
    this.drain();
  }

  /**
   * Handles backlogged frames in order. A request the handler answers
   * synchronously (every cache request) is answered within this call, without
   * a promise per frame; an asynchronous one holds the rest back until it is done.
   */
  private drain(): void {
    while (!this.waiting && this.backlog.length > 0) {
      const item = this.backlog.shift()!;
      const pending = 'failure' in item ? this.fail(item.failure) : this.process(item);
      if (pending) {
        this.waiting = true;
        void pending.finally(() => {
          this.waiting = false;
          this.drain();
        });
      }
    }
  }

  private process(frame: Frame): void | Promise<void> {
    if (this.closed) return;
    if (frame.type === MsgType.SEALED) return this.processSealed(frame);
    return this.processPlain(frame);
  }

  private async processPlain(frame: Frame): Promise<void> {
    let reply: Reply;
    try {
      if (SEALED_ONLY.has(frame.type)) {
        throw new ProtocolError('UNSUPPORTED_TYPE', `${typeName(frame.type)} is a cache request and is accepted only inside a sealed frame`);
      }
      const req = decodeRequest(frame);
      if (req.type === 'hello') reply = this.hello(req.version, req.publicKey);
      else reply = await this.handler.handle(req, this.peerPid, false);
      this.write(encodeFrame(...frameParts(encodeReply(reply))));
      if (req.type === 'stop') this.handler.stopRequested();
    } catch (err) {
      this.write(encodeFrame(...frameParts(encodeReply(this.replyFor(err)))));
      if (err instanceof ProtocolError && err.fatal) this.close();
    }
  }

  private processSealed(frame: Frame): void | Promise<void> {
    if (!this.channel) {
      this.write(encodeFrame(...frameParts(encodeReply(this.replyFor(new ProtocolError('NO_SESSION', 'sealed frame before the HELLO handshake'))))));
      return;
    }
    let opened: OpenedFrame;
    try {
      opened = this.channel.open(frame);
    } catch (err) {
      // Envelope failures are answered in clear: the payload could not be trusted.
      this.handler.log('warning', `rejected a sealed frame from pid ${this.peerPid ?? '?'}: ${(err as Error).message}`);
      this.write(encodeFrame(...frameParts(encodeReply(this.replyFor(err)))));
      return;
    }
    let reply: Reply | Promise<Reply>;
    try {
      if (!SEALED_ONLY.has(opened.inner.type)) {
        throw new ProtocolError('UNSUPPORTED_TYPE', `${typeName(opened.inner.type)} is not a cache request`);
      }
      reply = this.handler.handle(decodeRequest(opened.inner), this.peerPid, true, this.keyMemory);
    } catch (err) {
      reply = this.replyFor(err);
    }
    if (!(reply instanceof Promise)) return this.answerSealed(opened, reply);
    return reply.then((r) => this.answerSealed(opened, r), (err: unknown) => this.answerSealed(opened, this.replyFor(err)));
  }

  /** Zeroes the request's plaintext, then seals the reply, encoded straight into the channel's secure scratch. */
  private answerSealed(opened: OpenedFrame, reply: Reply): void {
    opened.release();
    try {
      if (this.channel) this.write(this.channel.sealEncoded((alloc) => encodeReply(reply, alloc)));
    } finally {
      if (reply.type === 'cache-key') this.keyScratch.give(reply.key);
    }
  }

  private hello(version: number, clientKey: Buffer): Reply {
    if (version !== PROTOCOL_VERSION) {
      throw new ProtocolError('VERSION_MISMATCH', `client speaks protocol version ${version}; this agent speaks ${PROTOCOL_VERSION}`);
    }
    const ours = ephemeralKeys();
    // The new session first: a refused HELLO must leave the one in use intact.
    const next = SecureChannel.forServer(ours, clientKey);
    this.channel?.destroy();
    this.channel = next;
    return { type: 'hello-ok', version: PROTOCOL_VERSION, publicKey: ours.publicKey, pid: process.pid };
  }

  private fail(err: unknown): void {
    this.write(encodeFrame(...frameParts(encodeReply(this.replyFor(err)))));
    this.handler.log('warning', `closing a connection from pid ${this.peerPid ?? '?'}: ${(err as Error).message}`);
    this.close();
  }

  private write(buf: Buffer): void {
    if (!this.closed && this.socket.writable) this.socket.write(buf);
  }

  close(): void {
    if (this.closed) return;
    this.socket.end();
    this.dispose();
  }

  private dispose(): void {
    this.closed = true;
    this.channel?.destroy();
    this.channel = null;
    this.keyScratch.destroy();
    this.decoder.clear();
  }
}

function frameParts(f: Frame): [number, Buffer] {
  return [f.type, f.payload];
}
