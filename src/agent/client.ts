/**
 * The agent client: one connection, requests answered in order, cache
 * requests sealed after a HELLO handshake. Keys returned by get() are in
 * sodium secure memory; callers wipe them (protocol `wipe`) when done.
 */
import {
  decodeReply,
  encodeFrame,
  encodeRequest,
  ephemeralKeys,
  MsgType,
  PROTOCOL_VERSION,
  protocolErrorName,
  SecureChannel,
  wipe,
  type ListEntry,
  type Reply,
  type Request,
} from '../protocol/index.js';
import { keySlots } from '../native/key-slots.js';
import { loadSodium } from '../native/sodium.js';
import { agentEndpoint, type Endpoint } from './paths.js';
import { AgentError } from './agent-error.js';
import { openTransport, type Transport, type TransportChoice, type TransportKind } from './transport.js';

export { AgentError } from './agent-error.js';
export type { TransportChoice, TransportKind } from './transport.js';

const sodium = loadSodium();

export interface CachedKey {
  /** Secure memory: wipe() it when done. */
  key: Buffer;
  ttl: number;
}

export interface ConnectOptions {
  /** Default `net`; connectAgent (the CLI's way in) passes STASH_AGENT_TRANSPORT's, `auto` by default (src/agent/transport.ts). */
  transport?: TransportChoice | undefined;
  /** Blocking transport: how long one reply may take (default 10 s). */
  replyTimeoutMs?: number | undefined;
}

export class AgentClient {
  private channel: SecureChannel | null = null;
  private handshaking: Promise<SecureChannel> | null = null;
  agentPid: number | null = null;

  private reopening: Promise<void> | null = null;

  private constructor(
    private transport: Transport,
    readonly endpoint: Endpoint,
    private readonly opts: ConnectOptions & { timeoutMs: number },
  ) {}

  /** Which transport this connection uses (`auto` resolved). */
  get transportUsed(): TransportKind {
    return this.transport.kind;
  }

  /**
   * After the agent closed an idle connection (it does after 5 minutes without
   * traffic), opens a new one and forgets the old session: a command that
   * waited at a password prompt, or for a long `stash env` child, goes on.
   * Activities are not tied to a connection, so their tokens stay valid.
   */
  private reopenIfIdle(): Promise<void> {
    if (this.reopening === null && this.transport.closedWhileIdle()) {
      this.reopening = this.reopen().finally(() => {
        this.reopening = null;
      });
    }
    return this.reopening ?? Promise.resolve();
  }

  private async reopen(): Promise<void> {
    const transport = await openTransport(this.endpoint, { ...this.opts, transport: this.transport.kind }).catch(
      (err: Error) => {
        throw new AgentError('AGENT_UNAVAILABLE', `cannot reconnect to the agent: ${err.message}`);
      },
    );
    this.transport.close();
    this.channel?.destroy();
    this.channel = null;
    this.transport = transport;
  }

  /** Connects to a running agent (no autostart). Rejects with the system error (its `code`) when none answers. */
  static async connect(
    endpoint: Endpoint = agentEndpoint(),
    timeoutMs = 2000,
    opts: ConnectOptions = {},
  ): Promise<AgentClient> {
    const all = { ...opts, timeoutMs };
    return new AgentClient(await openTransport(endpoint, all), endpoint, all);
  }

  private roundTrip(wire: Buffer) {
    return this.transport.request(wire);
  }

  private static check(reply: Reply): Reply {
    if (reply.type === 'error') {
      const name = protocolErrorName(reply.code) ?? `ERROR_${reply.code}`;
      throw new AgentError(`AGENT_${name}`, `agent: ${reply.message}`, reply.code);
    }
    return reply;
  }

  private async plain(req: Request): Promise<Reply> {
    await this.reopenIfIdle();
    const f = encodeRequest(req);
    return AgentClient.check(decodeReply(await this.roundTrip(encodeFrame(f.type, f.payload))));
  }

  /** The sealed channel, after one HELLO however many requests start at once (a second HELLO would replace the session under the first). */
  private handshake(): Promise<SecureChannel> {
    if (this.channel) return Promise.resolve(this.channel);
    this.handshaking ??= this.hello().finally(() => {
      this.handshaking = null;
    });
    return this.handshaking;
  }

  /**
   * Completes the HELLO now rather than at the first sealed request, and
   * resolves with the agent's pid: proof that an agent of this protocol
   * answers, not just something listening on the socket.
   */
  async greet(): Promise<number> {
    await this.handshake();
    return this.agentPid ?? -1;
  }

  /** The uid of the process serving this connection (kernel-reported); null on Windows (checked when the pipe opened). */
  peerUid(): number | null {
    return this.transport.peerUid();
  }

  private async hello(): Promise<SecureChannel> {
    const ours = ephemeralKeys();
    let reply: Reply;
    try {
      reply = await this.plain({ type: 'hello', version: PROTOCOL_VERSION, publicKey: ours.publicKey });
    } catch (err) {
      wipe(ours.secretKey);
      if (err instanceof AgentError && err.code === 'AGENT_VERSION_MISMATCH')
        throw new AgentError('AGENT_VERSION', err.message);
      throw err;
    }
    if (reply.type !== 'hello-ok') {
      wipe(ours.secretKey);
      throw new AgentError('AGENT_PROTOCOL', `unexpected ${reply.type} reply to hello`);
    }
    this.agentPid = reply.pid;
    this.channel = SecureChannel.forClient(ours, reply.publicKey);
    return this.channel;
  }

  /**
   * Sends a sealed cache request. The request is encoded straight into the
   * channel's secure scratch and the reply decoded there; both are zeroed
   * before this returns (read() copies out what it keeps).
   */
  private async sealed<T>(req: Request, read: (reply: Reply) => T): Promise<T> {
    await this.reopenIfIdle();
    const channel = this.channel ?? (await this.handshake());
    const frame = await this.roundTrip(channel.sealEncoded((alloc) => encodeRequest(req, alloc)));
    if (frame.type !== MsgType.SEALED) return read(AgentClient.check(decodeReply(frame)));
    const opened = channel.open(frame);
    try {
      return read(AgentClient.check(decodeReply(opened.inner)));
    } finally {
      opened.release();
    }
  }

  /** The cached key for `id`, or null on a miss. A hit slides the entry's expiry. */
  get(id: Buffer): Promise<CachedKey | null> {
    return this.sealed({ type: 'get', id }, (r) => {
      if (r.type === 'cache-miss') return null;
      if (r.type !== 'cache-key') throw new AgentError('AGENT_PROTOCOL', `unexpected ${r.type} reply to get`);
      return { key: keySlots.copy(r.key), ttl: r.ttl };
    });
  }

  /**
   * Like get(), for a caller that asks again and again (a long-lived process):
   * the key is copied into `out`, a sodium secure buffer the caller keeps and
   * reuses, instead of a fresh one per call (sodium_malloc and sodium_free are
   * about ten system calls each time). Bytes of `out` past the key are zeroed.
   * Returns the key's length and TTL, or null on a miss (`out` zeroed).
   */
  getInto(id: Buffer, out: Buffer): Promise<{ length: number; ttl: number } | null> {
    if (!(out as Buffer & { secure?: boolean }).secure) {
      return Promise.reject(
        new AgentError(
          'AGENT_INSECURE_BUFFER',
          'getInto needs a sodium secure buffer (sodium_malloc) to copy the key into',
        ),
      );
    }
    return this.sealed({ type: 'get', id }, (r) => {
      sodium.sodium_memzero(out);
      if (r.type === 'cache-miss') return null;
      if (r.type !== 'cache-key') throw new AgentError('AGENT_PROTOCOL', `unexpected ${r.type} reply to get`);
      if (r.key.length > out.length) {
        throw new AgentError(
          'AGENT_BUFFER_TOO_SMALL',
          `the cached key has ${r.key.length} bytes; the buffer given to getInto has ${out.length}`,
        );
      }
      r.key.copy(out);
      return { length: r.key.length, ttl: r.ttl };
    });
  }

  /** Stores a key (copied; the caller keeps its buffer). ttl null = the agent's default (900 s). */
  put(id: Buffer, key: Buffer, opts: { path?: string | null; ttl?: number | null } = {}): Promise<void> {
    return this.sealed({ type: 'put', id, key, path: opts.path ?? null, ttl: opts.ttl ?? null }, (r) => {
      if (r.type !== 'ack') throw new AgentError('AGENT_PROTOCOL', `unexpected ${r.type} reply to put`);
    });
  }

  /** Removes one entry; true when it existed. */
  forget(id: Buffer): Promise<boolean> {
    return this.sealed({ type: 'forget', id }, (r) => r.type === 'ack' && r.count > 0);
  }

  /** Removes every entry; returns how many there were. */
  forgetAll(): Promise<number> {
    return this.sealed({ type: 'forget-all' }, (r) => (r.type === 'ack' ? r.count : 0));
  }

  /** Every cached entry (id, path, TTL, time left), fetched page by page. Never extends a TTL. */
  async list(): Promise<ListEntry[]> {
    const out: ListEntry[] = [];
    for (let guard = 0; guard < 1000; guard++) {
      const page = await this.sealed({ type: 'list', offset: out.length }, (r) => {
        if (r.type !== 'list') throw new AgentError('AGENT_PROTOCOL', `unexpected ${r.type} reply to list`);
        return { total: r.total, entries: r.entries.map((e) => ({ ...e, id: Buffer.from(e.id) })) };
      });
      out.push(...page.entries);
      if (page.entries.length === 0 || out.length >= page.total) break;
    }
    return out;
  }

  /** Asks the agent to wipe everything and exit. */
  async stop(): Promise<void> {
    await this.plain({ type: 'stop' });
  }

  /** The agent's diagnostics document. */
  async status(): Promise<Record<string, unknown>> {
    const r = await this.plain({ type: 'status' });
    if (r.type !== 'status') throw new AgentError('AGENT_PROTOCOL', `unexpected ${r.type} reply to status`);
    return r.status;
  }

  /** Registers a secret activity for `pid` (ours or a descendant); returns its token (hex). */
  async registerActivity(pid: number, kind: string): Promise<string> {
    const r = await this.plain({ type: 'register', pid, kind: kind as never });
    if (r.type !== 'token') throw new AgentError('AGENT_PROTOCOL', `unexpected ${r.type} reply to register`);
    return r.token.toString('hex');
  }

  async unregisterActivity(pid: number, token: string): Promise<void> {
    if (!/^[0-9a-f]{32}$/.test(token)) throw new AgentError('AGENT_BAD_TOKEN', 'activity token must be 32 hex digits');
    await this.plain({ type: 'unregister', pid, token: Buffer.from(token, 'hex') });
  }

  /** The secure scratch buffers of this connection's channel (null before the handshake): for tests. */
  scratchState(): ReturnType<SecureChannel['scratchState']> | null {
    return this.channel?.scratchState() ?? null;
  }

  close(): void {
    this.channel?.destroy();
    this.channel = null;
    this.transport.close();
  }
}
