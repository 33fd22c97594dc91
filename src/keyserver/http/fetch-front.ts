/**
 * A front on the raw connection for the commonest request of all, a fetch of
 * a share: it reads the connection's bytes before node:http does, answers
 * each request that is a usual fetch (the exact request line, a short list of
 * headers, a fetch body) with the bytes node:http would have sent, and hands
 * the connection to node:http at the first request it does not take, with
 * that request's bytes put back unread. node:http's parser, IncomingMessage
 * and ServerResponse cost more than the fetch itself (docs/benchmarks.md,
 * "Fetch beside bare node:http, with wrk").
 *
 * What it takes, exactly (anything else goes to node:http, and from then on
 * the connection is node:http's):
 * - `POST /v1/share HTTP/1.1`, headers ending within 8 KiB of the request's
 *   start, each named once from FRONT_HEADERS, with no control character,
 *   no byte above 0x7e and no folded line; Host present; Content-Type exactly
 *   the binary media type or `application/json`; Content-Length of digits, up
 *   to the largest usual fetch (258 bytes binary, 1 KiB JSON); Connection, if
 *   given, `keep-alive` or `close`;
 * - a body decoding as a fetch (binary: the usual form; JSON: as the app
 *   decodes it) of a code that the server answers itself (`take` says so
 *   before anything is counted). A request cut by the end of a read waits for
 *   one more read.
 *
 * What node:http would do and this does too: its answer bytes (status line,
 * headers in order, Date, Connection and Keep-Alive), answers in request order
 * on a pipelined connection, no more reading while answers wait to go out,
 * the keep-alive timeout between requests and the headers timeout before the
 * first, closing after `Connection: close` (either side), and server.close():
 * idle connections are closed at once, busy ones after their answer.
 */
import { STATUS_CODES, type IncomingHttpHeaders, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { BINARY_MEDIA_TYPE, JSON_MEDIA_TYPE } from '../wire/messages.js';
import { HSTS_HEADER, HSTS_VALUE } from '../tls/profile.js';
import { COMMON_HEADERS, type Answer } from './answers.js';
import { requestOf, usualFetchCode } from './fetch-body.js';

/** A request the front took, as the fetch rules need it: its headers (lowercase names) and its connection. */
export interface FrontRequest {
  headers: IncomingHttpHeaders;
  socket: { remoteAddress?: string | undefined };
}

/**
 * Answers a fetch of `code` taken by the front, through `fetched` (status 200,
 * the body one character per byte) or `failed`, at once or later. Returns
 * false, having done nothing, for a code the server does not answer itself:
 * the request then goes to node:http.
 */
export type FrontFetch = (
  req: FrontRequest,
  code: string,
  fetched: (type: string, body: string) => void,
  failed: (answer: Answer) => void,
) => boolean;

/** Headers a usual fetch may carry: the ones the fetch rules read, and ones no part of the server reads. */
const FRONT_HEADERS = new Set([
  'host',
  'content-type',
  'content-length',
  'connection',
  'accept',
  'x-forwarded-for',
  'user-agent',
  'accept-encoding',
  'accept-language',
  'sec-fetch-mode',
]);

const REQUEST_LINE = 'POST /v1/share HTTP/1.1\r\n';
const REQUEST_LINE_BYTES = Buffer.from(REQUEST_LINE, 'latin1');
/** node:http's maxHeaderSize of the key server (server.ts): a longer head goes to node:http, which refuses it. */
const MAX_HEAD = 8192;
/** Version, type, length and a code of up to 255 bytes: the largest body of a usual binary fetch. */
const MAX_FETCH_BODY = 3 + 255;
/** The largest JSON fetch body taken here (`{"op":"fetch","code":"..."}` is about 40 bytes). */
const MAX_JSON_FETCH_BODY = 1024;

/** A request the front takes: where it ends in the buffer, its code and headers, and whether it asked to close. */
export interface FrontParsed {
  end: number;
  code: string;
  headers: IncomingHttpHeaders;
  close: boolean;
}

/** True when `s` has only visible ASCII, spaces and tabs (no CR, LF, NUL, DEL or byte above 0x7e). */
function plainValue(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c > 0x7e) return false;
  }
  return true;
}

/** What parseFrontRequest says of the start of a request that may still become a usual fetch. */
export const MORE = 'more';

/** The code of a JSON fetch body (decoded as the app decodes it), else undefined. */
function jsonFetchCode(body: Buffer): string | undefined {
  const request = requestOf(body, true);
  return request?.op === 'fetch' ? request.code : undefined;
}

/**
 * The usual fetch at `from` in `buf`; MORE when what is there is the start
 * of what may still be one (the request line so far, or a head or body not
 * all arrived); undefined when it is anything else.
 */
export function parseFrontRequest(buf: Buffer, from: number): FrontParsed | typeof MORE | undefined {
  const avail = buf.length - from;
  if (avail < REQUEST_LINE.length) return REQUEST_LINE.startsWith(buf.toString('latin1', from)) ? MORE : undefined;
  if (buf.compare(REQUEST_LINE_BYTES, 0, REQUEST_LINE.length, from, from + REQUEST_LINE.length) !== 0) return undefined;
  const headEnd = buf.indexOf('\r\n\r\n', from + REQUEST_LINE.length - 2, 'latin1');
  if (headEnd < 0) return avail < MAX_HEAD ? MORE : undefined;
  if (headEnd + 4 - from > MAX_HEAD) return undefined;
  const headLength = headEnd + 4 - from;
  let head = lastParsed;
  if (
    head === undefined ||
    lastHead.length !== headLength ||
    buf.compare(lastHead, 0, headLength, from, headEnd + 4) !== 0
  ) {
    head = parseHead(buf.toString('latin1', from + REQUEST_LINE.length, headEnd));
    if (head === undefined) return undefined;
    lastHead = Buffer.allocUnsafeSlow(headLength); // its own memory: no pool slab kept alive
    buf.copy(lastHead, 0, from, headEnd + 4);
    lastParsed = head;
  }
  const end = headEnd + 4 + head.length;
  if (end > buf.length) return MORE;
  const code = head.json ? jsonFetchCode(buf.subarray(headEnd + 4, end)) : usualFetchCode(buf, headEnd + 4, end);
  return code === undefined ? undefined : { end, code, headers: head.headers, close: head.close };
}

/** What a head of a usual fetch says: its headers (shared by every request with the same head: read only), body length, Connection: close. */
interface FrontHead {
  headers: IncomingHttpHeaders;
  length: number;
  /** A JSON body (else binary). */
  json: boolean;
  close: boolean;
}

/**
 * The last head taken, byte for byte, and what it said: a client (wrk, the
 * stash client) sends the same head with every fetch, parsed once here.
 */
let lastHead: Buffer = Buffer.alloc(0);
let lastParsed: FrontHead | undefined;

/** The header lines of a usual fetch (between the request line and the blank line), or undefined. */
function parseHead(text: string): FrontHead | undefined {
  const headers: IncomingHttpHeaders = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon).toLowerCase();
    // Named from the list (so no space before the colon, and no folded line: those start with a space), once.
    if (!FRONT_HEADERS.has(name) || headers[name] !== undefined) return undefined;
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!plainValue(value)) return undefined;
    headers[name] = value;
  }
  const length = headers['content-length'];
  const type = headers['content-type'];
  const json = type === JSON_MEDIA_TYPE;
  if (
    headers.host === undefined ||
    (type !== BINARY_MEDIA_TYPE && !json) ||
    length === undefined ||
    !/^[0-9]{1,4}$/.test(length) ||
    Number(length) > (json ? MAX_JSON_FETCH_BODY : MAX_FETCH_BODY)
  )
    return undefined;
  const connection = headers.connection?.toLowerCase();
  if (connection !== undefined && connection !== 'keep-alive' && connection !== 'close') return undefined;
  return { headers, length: Number(length), json, close: connection === 'close' };
}

/** The Date header's value, as node:http writes it: made at most once a second. */
let dateCache: string | undefined;
function utcDate(): string {
  if (dateCache === undefined) {
    const d = new Date();
    dateCache = d.toUTCString();
    setTimeout(() => {
      dateCache = undefined;
    }, 1000 - d.getMilliseconds()).unref();
  }
  return dateCache;
}

const COMMON_LINES = COMMON_HEADERS.map(([k, v]) => `${k}: ${v}\r\n`).join('');

/**
 * Status line to the blank line, as node:http writes them for the Koa app's
 * writeHead; `lead` is the header that writeHead adds after the app's own
 * (HSTS over HTTPS: tls/https-server.ts), so it comes after Content-Length.
 */
function head(lead: string, status: number, lines: string, connection: string): string {
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n${COMMON_LINES}${lines}${lead}Date: ${utcDate()}\r\n${connection}\r\n`;
}

/** The header line an HTTPS server's answers start with (HstsResponse in tls/https-server.ts). */
const HSTS_LINE = `${HSTS_HEADER}: ${HSTS_VALUE}\r\n`;

/** The Connection (and Keep-Alive) lines node:http adds, given the answer's own headers. */
function connectionLines(close: boolean, keepAliveMs: number): string {
  if (close) return 'Connection: close\r\n';
  const seconds = Math.floor(keepAliveMs / 1000);
  return keepAliveMs > 0
    ? `Connection: keep-alive\r\nKeep-Alive: timeout=${seconds}\r\n`
    : 'Connection: keep-alive\r\n';
}

/** A fetched answer's bytes (one character per byte), as the Koa route's. */
function fetchedBytes(lead: string, type: string, body: string, close: boolean, keepAliveMs: number): string {
  const lines = `Content-Type: ${type}\r\nContent-Length: ${body.length}\r\n`;
  return head(lead, 200, lines, connectionLines(close, keepAliveMs)) + body;
}

/** An answer's bytes (one character per byte), as the Koa app's (sendAnswer); `closes` when the answer itself says Connection: close. */
function answerBytes(lead: string, a: Answer, close: boolean, keepAliveMs: number): { bytes: string; closes: boolean } {
  const body = typeof a.body === 'string' ? Buffer.from(a.body) : a.body;
  let lines = '';
  let own = false;
  let closes = close;
  for (const [k, v] of a.headers) {
    lines += `${k}: ${v}\r\n`;
    if (k.toLowerCase() === 'connection') {
      own = true;
      closes = closes || v.toLowerCase() === 'close';
    }
  }
  lines += `Content-Type: ${a.type}\r\nContent-Length: ${body.length}\r\n`;
  const bytes = head(lead, a.status, lines, own ? '' : connectionLines(close, keepAliveMs)) + body.toString('latin1');
  return { bytes, closes };
}

type Listener = (socket: Socket) => void;

const ignore = (): void => {};
/** node:http's answer to a request not whole by the headers deadline (and to a connection that sent nothing). */
const REQUEST_TIMEOUT = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';
/** What node:http adds to keepAliveTimeout before it closes an idle connection (HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER). */
const KEEP_ALIVE_MARGIN_MS = 1000;

/** What the front keeps for one server: node:http's own listeners, the connections it holds, whether the server is closing. */
class FrontServer {
  /** Connections the front holds; each says whether an answer is being made on it, or the rest of a request awaited. */
  readonly held = new Set<FrontConnection>();
  /** Connections it has ended whose last bytes may still be on their way out. */
  readonly ending = new Set<Socket>();
  closing = false;

  constructor(
    readonly server: Server,
    /** The header line that node:http's writeHead adds after the app's own ('' over HTTP). */
    readonly lead: string,
    private readonly own: Listener[],
    readonly take: () => FrontFetch | undefined,
  ) {}

  /** The connection goes to node:http's own listeners, as it would have without the front. */
  toNodeHttp(socket: Socket): void {
    for (const l of this.own) l.call(this.server, socket);
  }

  /** server.close() calls closeIdleConnections(): a held connection between requests is idle. */
  wrapClose(): void {
    const { server, held, ending } = this;
    const closeIdle = server.closeIdleConnections.bind(server);
    const closeAll = server.closeAllConnections.bind(server);
    server.closeIdleConnections = () => {
      this.closing = true;
      for (const c of held) if (!c.busy && !c.waiting) c.socket.destroy();
      closeIdle();
    };
    server.closeAllConnections = () => {
      this.closing = true;
      for (const c of held) c.socket.destroy();
      for (const s of ending) s.destroy();
      closeAll();
    };
  }
}

/**
 * One connection the front holds, from its first byte until it ends or goes
 * to node:http. Its listeners are its own fields (made once per connection);
 * the rest are methods, shared by every connection.
 */
class FrontConnection {
  /** An answer is being made (or waits to go out): read no more requests. */
  busy = false;
  /** The rest of a request is awaited, for one more read. */
  waiting = false;
  private buf: Buffer = Buffer.alloc(0);
  private at = 0;
  private ended = false;
  /** When the request at `at` must have come whole (node:http's headers deadline); unset between requests. */
  private deadlineAt: number | undefined;
  // A timer of its own (not socket.setTimeout(), which every byte written would push back): set by the request's phase.
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly front: FrontServer,
    readonly socket: Socket,
  ) {}

  start(): void {
    const { socket } = this;
    this.front.held.add(this);
    this.deadlineAt = Date.now() + this.front.server.headersTimeout;
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    // A server with pauseOnConnect (multi/store-side.ts) makes its TLS sockets paused too: a 'data' listener alone reads nothing.
    socket.resume();
    // Before the first request, node:http's headers deadline.
    this.arm(this.front.server.headersTimeout);
  }

  private arm(ms: number): void {
    clearTimeout(this.timer);
    this.timer = ms > 0 ? setTimeout(this.onTimeout, ms) : undefined;
  }

  private stop(): void {
    const { socket } = this;
    this.front.held.delete(this);
    socket.off('drain', this.drained);
    socket.off('data', this.onData);
    socket.off('end', this.onEnd);
    socket.off('error', this.onError);
    socket.off('close', this.onClose);
    clearTimeout(this.timer);
  }

  /** The rest, from a request's start, goes to node:http. */
  private handOver(): void {
    const { socket } = this;
    this.stop();
    const rest = this.buf.subarray(this.at);
    this.buf = Buffer.alloc(0);
    if (this.ended) {
      // A request cut short by the client's end: nothing more can come to complete it.
      socket.destroy();
      return;
    }
    socket.pause();
    if (rest.length > 0) socket.unshift(rest);
    this.front.toNodeHttp(socket);
    socket.resume();
  }

  /** The connection ends after what was written; as node:http does, not left half open for the client to close. */
  private finish(): void {
    const { socket, front } = this;
    this.stop();
    socket.on('error', ignore); // a reset now has nobody else to hear it (HTTPS: tls.Server listens too)
    front.ending.add(socket);
    socket.once('close', () => front.ending.delete(socket));
    socket.destroySoon();
  }

  /** After an answer: more requests, an end, or waiting for the next (keep-alive timeout). */
  private next(): void {
    if (this.at < this.buf.length) {
      this.run();
      return;
    }
    this.buf = Buffer.alloc(0);
    this.at = 0;
    if (this.ended || this.front.closing) {
      this.finish();
      return;
    }
    this.deadlineAt = undefined;
    const ka = this.front.server.keepAliveTimeout;
    // node:http (20.x, 22.x) waits a second longer than it announces, so that a client's reuse at the edge does not meet a closed socket.
    this.arm(ka > 0 ? ka + KEEP_ALIVE_MARGIN_MS : 0);
  }

  /** Answers the client does not read yet: no more requests are read until they have gone out. */
  private waitDrain(): void {
    this.busy = true;
    this.socket.pause();
    this.socket.once('drain', this.drained);
  }

  private readonly drained = (): void => {
    this.busy = false;
    if (this.socket.destroyed) return;
    this.socket.resume();
    this.next();
  };

  private write(bytes: string, closes: boolean): boolean {
    this.socket.write(bytes, 'latin1');
    if (!closes) return true;
    this.finish();
    return false;
  }

  /** Takes the requests in the buffer, in order, until one is cut short, is not a usual fetch, or waits for its answer. */
  private run(): void {
    while (this.at < this.buf.length) {
      const req = parseFrontRequest(this.buf, this.at);
      if (req === MORE) {
        this.awaitRest();
        return;
      }
      this.waiting = false;
      this.deadlineAt = undefined;
      const fetch = req === undefined ? undefined : this.front.take();
      if (req === undefined || fetch === undefined) {
        this.handOver();
        return;
      }
      if (!this.answer(req, fetch)) return;
    }
    this.next();
  }

  /**
   * The rest is likely in the next read (a pipelined request cut by a read's end): wait for that one
   * read, within the request's headers deadline. A client that trickles its request gets node:http
   * and its deadlines; one that has ended can send no more.
   */
  private awaitRest(): void {
    if (this.waiting || this.ended) {
      this.handOver();
      return;
    }
    this.waiting = true;
    this.deadlineAt ??= Date.now() + this.front.server.headersTimeout;
    this.arm(Math.max(1, this.deadlineAt - Date.now()));
  }

  /** Answers `req` through `fetch`; true when its answer has gone out and the next request may be read. */
  private answer(req: FrontParsed, fetch: FrontFetch): boolean {
    const { socket, front } = this;
    const ka = front.server.keepAliveTimeout;
    let answered: { bytes: string; closes: boolean } | undefined;
    let sync = true;
    const settle = (bytes: string, closes: boolean): void => {
      if (sync) {
        answered = { bytes, closes };
        return;
      }
      this.settleLater(bytes, closes);
    };
    this.busy = true;
    const taken = fetch(
      { headers: req.headers, socket },
      req.code,
      (type, body) => settle(fetchedBytes(front.lead, type, body, req.close, ka), req.close),
      (a) => {
        const out = answerBytes(front.lead, a, req.close, ka);
        settle(out.bytes, out.closes);
      },
    );
    sync = false;
    if (!taken) {
      this.busy = false;
      this.handOver();
      return false;
    }
    this.at = req.end;
    if (answered === undefined) {
      // Answered later (another process has the share): read nothing more until then.
      socket.pause();
      this.arm(0);
      return false;
    }
    this.busy = false;
    if (!this.write(answered.bytes, answered.closes)) return false;
    if (socket.writableNeedDrain) {
      this.waitDrain();
      return false;
    }
    return true;
  }

  /** An answer made after `fetch` returned: it goes out, then reading goes on. */
  private settleLater(bytes: string, closes: boolean): void {
    this.busy = false;
    if (this.socket.destroyed) return;
    if (!this.write(bytes, closes)) return;
    if (this.socket.writableNeedDrain) this.waitDrain();
    else {
      this.socket.resume();
      this.next();
    }
  }

  private readonly onData = (chunk: Buffer): void => {
    this.arm(0);
    this.deadlineAt ??= Date.now() + this.front.server.headersTimeout;
    if (this.at < this.buf.length) {
      this.buf = Buffer.concat([this.buf.subarray(this.at), chunk]);
      this.at = 0;
    } else {
      this.buf = chunk;
      this.at = 0;
    }
    if (!this.busy) this.run();
  };

  private readonly onEnd = (): void => {
    this.ended = true;
    if (this.busy) return;
    if (this.at < this.buf.length) this.handOver();
    else this.finish();
  };

  /** The keep-alive deadline closes the connection; the headers deadline answers 408 first, as node:http does. */
  private readonly onTimeout = (): void => {
    if (this.deadlineAt === undefined) {
      this.stop();
      this.socket.destroy();
      return;
    }
    // A head come whole, its body not: node:http's body deadline answers it (the app's 408, with its body).
    if (this.buf.indexOf('\r\n\r\n', this.at, 'latin1') >= 0) {
      this.handOver();
      return;
    }
    this.socket.write(REQUEST_TIMEOUT);
    this.finish();
  };

  private readonly onError = (): void => {
    this.stop();
    this.socket.destroy();
  };

  private readonly onClose = (): void => this.stop();
}

/**
 * Puts the front before node:http's own listener of `server` ('connection'
 * for HTTP, 'secureConnection' for HTTPS). `take` is asked at each request
 * (undefined until the app exists: then every connection goes to node:http).
 */
export function installFetchFront(server: Server, https: boolean, take: () => FrontFetch | undefined): void {
  const event = https ? 'secureConnection' : 'connection';
  const front = new FrontServer(server, https ? HSTS_LINE : '', server.listeners(event) as Listener[], take);
  server.removeAllListeners(event);
  front.wrapClose();
  server.on(event, (socket: Socket) => {
    if (front.closing || take() === undefined) front.toNodeHttp(socket);
    else new FrontConnection(front, socket).start();
  });
}
