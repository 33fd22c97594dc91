/**
 * One client connection of the agent: framing, the secure channel, and the
 * dispatch of each request to the agent's handlers. Errors become ERROR
 * replies; only a connection whose framing can no longer be trusted is closed.
 */
import type { Socket } from 'node:net';
import {
  decodeRequest,
  encodeFrame,
  encodeReply,
  ephemeralKeys,
  FrameDecoder,
  MAX_FRAME_BYTES,
  MsgType,
  PROTOCOL_VERSION,
  ProtocolError,
  MAX_KEY_BYTES,
  SEALED_ONLY,
  SecureChannel,
  SecureScratch,
  typeName,
  type Frame,
  type OpenedFrame,
  type Reply,
  type Request,
} from '../protocol/index.js';
import { StashError } from '../errors.js';
import {
  FRAME_DEADLINE_MS,
  MAX_HELLOS,
  MAX_SMALL_PIECES,
  OUTPUT_BOUND_BYTES,
  OUTPUT_STALL_MS,
  SMALL_PIECE_BYTES,
} from './limits.js';

/** The connection's time and size limits; the defaults are limits.ts's. */
export interface ConnectionLimits {
  frameDeadlineMs: number;
  outputBoundBytes: number;
  outputStallMs: number;
  /** Small reads (under SMALL_PIECE_BYTES) a frame may arrive in. */
  maxSmallPieces: number;
  /** HELLO frames the connection may send; the next one closes it. */
  maxHellos: number;
}

const DEFAULT_LIMITS: ConnectionLimits = {
  frameDeadlineMs: FRAME_DEADLINE_MS,
  outputBoundBytes: OUTPUT_BOUND_BYTES,
  outputStallMs: OUTPUT_STALL_MS,
  maxSmallPieces: MAX_SMALL_PIECES,
  maxHellos: MAX_HELLOS,
};

/** What a connection needs from the agent. */
export interface RequestHandler {
  /**
   * Handles one decoded request. `peerPid` is the kernel-reported client pid (null on Windows).
   * A CACHE_KEY reply's key goes in `keyMemory(length)` (secure memory the connection zeroes after sealing).
   */
  handle(
    req: Request,
    peerPid: number | null,
    sealed: boolean,
    keyMemory?: (length: number) => Buffer,
  ): Reply | Promise<Reply>;
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
  /** True while an asynchronous request is in flight: later frames wait in the decoder, in order. */
  private waiting = false;
  private closed = false;
  /** Set while unsent replies exceed OUTPUT_BOUND_BYTES: no request is read or handled until they drain. */
  private stalled: NodeJS.Timeout | null = null;
  /** Runs from the first byte of an incomplete frame until the frame is complete (FRAME_DEADLINE_MS). */
  private frameDeadline: NodeJS.Timeout | null = null;
  /** Small reads that left the current frame incomplete. */
  private smallPieces = 0;
  /** HELLO frames received, refused ones included (limits.maxHellos). */
  private hellos = 0;
  private paused = false;

  constructor(
    private readonly socket: Socket,
    private readonly peerPid: number | null,
    private readonly handler: RequestHandler,
    private readonly limits: ConnectionLimits = DEFAULT_LIMITS,
  ) {
    socket.on('data', (data: Buffer) => this.onData(data));
    socket.on('drain', () => this.onDrain());
    socket.on('close', () => this.dispose());
    socket.on('error', () => this.dispose());
  }

  private onData(data: Buffer): void {
    if (this.closed) return;
    try {
      this.decoder.push(data);
    } catch (err) {
      this.fail(err);
      return;
    }
    this.drain();
    // Still incomplete after a small read: a frame trickled in pieces costs the agent a wake-up per piece.
    if (
      !this.closed &&
      this.frameDeadline &&
      data.length < SMALL_PIECE_BYTES &&
      ++this.smallPieces > this.limits.maxSmallPieces
    ) {
      this.fail(
        new ProtocolError(
          'SLOW_FRAME',
          `a frame arrived in more than ${this.limits.maxSmallPieces} small pieces; send each frame in one write`,
          true,
        ),
      );
    }
  }

  /**
   * Takes frames from the decoder and handles them strictly in order. A request
   * the handler answers synchronously (every cache request) is answered within
   * this call; an asynchronous one holds the rest back until it is done. Stops
   * while the client leaves too many replies unread (it is not reading: more
   * requests would only pile replies up in the agent's memory).
   */
  private drain(): void {
    while (!this.waiting && !this.closed) {
      if (this.socket.writableLength > this.limits.outputBoundBytes) {
        this.stall();
        return;
      }
      let frame: Frame | null;
      try {
        frame = this.decoder.next();
      } catch (err) {
        this.fail(err);
        return;
      }
      if (!frame) break;
      this.frameDone();
      const pending = this.process(frame);
      if (pending) {
        this.waiting = true;
        void pending.finally(() => {
          this.waiting = false;
          this.drain();
        });
      }
    }
    if (!this.waiting && !this.closed && this.decoder.pending > 0 && !this.frameDeadline) {
      this.frameDeadline = setTimeout(() => this.frameTimedOut(), this.limits.frameDeadlineMs);
    }
    this.updateReading();
  }

  /** A whole frame arrived: its deadline and piece count end. */
  private frameDone(): void {
    if (this.frameDeadline) clearTimeout(this.frameDeadline);
    this.frameDeadline = null;
    this.smallPieces = 0;
  }

  private frameTimedOut(): void {
    this.frameDeadline = null;
    if (this.closed) return;
    const seconds = this.limits.frameDeadlineMs / 1000;
    this.fail(new ProtocolError('SLOW_FRAME', `a frame was not complete ${seconds} s after its first byte`, true));
  }

  /** Unsent replies passed the bound: stop reading, and drop the connection if they stay there. */
  private stall(): void {
    if (this.stalled) return;
    // The frame being read (if any) waits for us now, not for the client.
    if (this.frameDeadline) clearTimeout(this.frameDeadline);
    this.frameDeadline = null;
    this.stalled = setTimeout(() => {
      if (this.closed) return;
      this.handler.log(
        'warning',
        `dropped a connection from pid ${this.peerPid ?? '?'}: ${this.socket.writableLength} bytes of replies unread for ${this.limits.outputStallMs / 1000} s`,
      );
      this.socket.destroy();
      this.dispose();
    }, this.limits.outputStallMs);
    this.updateReading();
  }

  private onDrain(): void {
    if (!this.stalled || this.closed) return;
    clearTimeout(this.stalled);
    this.stalled = null;
    this.drain();
  }

  /** Reads from the socket only while nothing above holds reading back. */
  private updateReading(): void {
    if (this.closed) return;
    // Input waiting behind an asynchronous request is bounded too.
    const hold = this.stalled !== null || this.decoder.pending > MAX_FRAME_BYTES;
    if (hold && !this.paused) this.socket.pause();
    else if (!hold && this.paused) this.socket.resume();
    this.paused = hold;
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
        throw new ProtocolError(
          'UNSUPPORTED_TYPE',
          `${typeName(frame.type)} is a cache request and is accepted only inside a sealed frame`,
        );
      }
      // Every HELLO frame counts, refused ones too: a client sends one, or two after UNKNOWN_FLAGS.
      if (frame.type === MsgType.HELLO && ++this.hellos > this.limits.maxHellos) {
        throw new ProtocolError(
          'HANDSHAKE_LIMIT',
          `more than ${this.limits.maxHellos} HELLO frames on one connection; a client sends one`,
          true,
        );
      }
      const req = decodeRequest(frame);
      if (req.type === 'hello') reply = this.hello(req.version, req.publicKey);
      else reply = await this.handler.handle(req, this.peerPid, false);
      this.write(encodeFrame(...frameParts(encodeReply(reply))));
      if (req.type === 'stop') this.handler.stopRequested();
    } catch (err) {
      this.write(encodeFrame(...frameParts(encodeReply(this.replyFor(err)))));
      if (err instanceof ProtocolError && err.fatal) {
        this.handler.log('warning', `closing a connection from pid ${this.peerPid ?? '?'}: ${err.message}`);
        this.close();
      }
    }
  }

  private processSealed(frame: Frame): void | Promise<void> {
    if (!this.channel) {
      this.write(
        encodeFrame(
          ...frameParts(
            encodeReply(this.replyFor(new ProtocolError('NO_SESSION', 'sealed frame before the HELLO handshake'))),
          ),
        ),
      );
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
    return reply.then(
      (r) => this.answerSealed(opened, r),
      (err: unknown) => this.answerSealed(opened, this.replyFor(err)),
    );
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
      throw new ProtocolError(
        'VERSION_MISMATCH',
        `client speaks protocol version ${version}; this agent speaks ${PROTOCOL_VERSION}`,
      );
    }
    const ours = ephemeralKeys();
    // The new session first: a refused HELLO must leave the one in use intact.
    const next = SecureChannel.forServer(ours, clientKey);
    this.channel?.destroy();
    this.channel = next;
    return { type: 'hello-ok', version: PROTOCOL_VERSION, publicKey: ours.publicKey, pid: process.pid };
  }

  private fail(err: unknown): void {
    if (this.closed) return;
    this.write(encodeFrame(...frameParts(encodeReply(this.replyFor(err)))));
    this.handler.log('warning', `closing a connection from pid ${this.peerPid ?? '?'}: ${(err as Error).message}`);
    this.close();
  }

  private write(buf: Buffer): void {
    if (!this.closed && this.socket.writable) this.socket.write(buf);
  }

  /**
   * Sends what is queued (an ERROR reply), then closes. Reads nothing more:
   * a half-closed socket would otherwise go on reading, and discarding, what
   * the client keeps sending. A client that does not take the reply within
   * a second loses it.
   */
  close(): void {
    if (this.closed) return;
    this.socket.pause();
    this.socket.end(() => this.socket.destroy());
    setTimeout(() => this.socket.destroy(), 1000).unref();
    this.dispose();
  }

  private dispose(): void {
    this.closed = true;
    for (const t of [this.stalled, this.frameDeadline]) if (t) clearTimeout(t);
    this.stalled = this.frameDeadline = null;
    this.channel?.destroy();
    this.channel = null;
    this.keyScratch.destroy();
    this.decoder.clear();
  }
}

function frameParts(f: Frame): [number, Buffer] {
  return [f.type, f.payload];
}
