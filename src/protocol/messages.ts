/**
 * SBX2 messages: type codes and payload layouts (docs/protocol.md documents
 * every byte). Pure encode/decode; payloads that carry key bytes are built in
 * memory supplied by the caller (sodium_malloc) and decoded as views, so the
 * caller decides where key bytes live and when they are zeroed.
 */
import { ProtocolError } from './errors.js';
import { Reader, Writer } from './cursor.js';
import { MAX_PAYLOAD_BYTES, type Frame } from './frame.js';
import {
  ACTIVITY_KINDS,
  MAX_ID_BYTES,
  MAX_KEY_BYTES,
  MAX_PATH_BYTES,
  MAX_TTL_SECONDS,
  PROTOCOL_VERSION,
  TOKEN_BYTES,
  type ActivityKindName,
} from './limits.js';

export const MsgType = {
  // control requests (plain frames)
  HELLO: 0x01,
  STOP: 0x02,
  REGISTER_ACTIVITY: 0x03,
  UNREGISTER_ACTIVITY: 0x04,
  STATUS: 0x05,
  // the secure envelope, both directions
  SEALED: 0x10,
  // cache requests (only inside SEALED)
  GET: 0x20,
  PUT: 0x21,
  FORGET: 0x22,
  FORGET_ALL: 0x23,
  LIST: 0x24,
  // replies
  ACK: 0x80,
  HELLO_OK: 0x81,
  TOKEN: 0x83,
  STATUS_REPLY: 0x85,
  CACHE_MISS: 0xa1,
  CACHE_KEY: 0xa2,
  LIST_REPLY: 0xa3,
  ERROR: 0xff,
} as const;

/** Types that are accepted only inside a SEALED frame. */
export const SEALED_ONLY: ReadonlySet<number> = new Set([
  MsgType.GET,
  MsgType.PUT,
  MsgType.FORGET,
  MsgType.FORGET_ALL,
  MsgType.LIST,
]);

const typeNames = new Map<number, string>(
  Object.entries(MsgType).map(([k, v]) => [v, k.toLowerCase().replace(/_/g, '-')]),
);

/** "get", "put", ... or "0x42" for an unknown type. */
export function typeName(type: number): string {
  return typeNames.get(type) ?? `0x${type.toString(16).padStart(2, '0')}`;
}

export type Request =
  | { type: 'hello'; version: number; publicKey: Buffer }
  | { type: 'stop' }
  | { type: 'register'; pid: number; kind: ActivityKindName }
  | { type: 'unregister'; pid: number; token: Buffer }
  | { type: 'status' }
  | { type: 'get'; id: Buffer }
  | { type: 'put'; id: Buffer; key: Buffer; path: string | null; ttl: number | null }
  | { type: 'forget'; id: Buffer }
  | { type: 'forget-all' }
  | { type: 'list'; offset: number };

export interface ListEntry {
  id: Buffer;
  path: string | null;
  ttl: number;
  expiresInMs: number;
  ageMs: number;
}

export type Reply =
  | { type: 'ack'; count: number }
  | { type: 'hello-ok'; version: number; publicKey: Buffer; pid: number }
  | { type: 'token'; token: Buffer }
  | { type: 'status'; status: Record<string, unknown> }
  | { type: 'cache-miss' }
  | { type: 'cache-key'; key: Buffer; ttl: number }
  | { type: 'list'; total: number; offset: number; entries: ListEntry[] }
  | { type: 'error'; code: number; message: string };

type Alloc = (n: number) => Buffer;

function checkId(id: Buffer, what: string): void {
  if (id.length < 1 || id.length > MAX_ID_BYTES) {
    throw new ProtocolError(
      'MALFORMED_PAYLOAD',
      `${what}: container id must be 1..${MAX_ID_BYTES} bytes, got ${id.length}`,
    );
  }
}

function readId(r: Reader, what: string): Buffer {
  const id = r.bytes(r.u8('container id length'), 'container id');
  checkId(id, what);
  return id;
}

function readPath(r: Reader, what: string): string | null {
  const n = r.u16('path length');
  if (n > MAX_PATH_BYTES)
    throw new ProtocolError('MALFORMED_PAYLOAD', `${what}: path of ${n} bytes exceeds ${MAX_PATH_BYTES}`);
  return n === 0 ? null : r.utf8(n, 'path');
}

/** Checks a TTL the way the agent does; null means "use the default". */
export function checkTtl(ttl: number | null): void {
  if (ttl === null) return;
  if (!Number.isInteger(ttl) || ttl <= 0)
    throw new ProtocolError('NON_POSITIVE_TTL', `TTL must be a positive whole number of seconds, got ${ttl}`);
  if (ttl > MAX_TTL_SECONDS)
    throw new ProtocolError('MALFORMED_PAYLOAD', `TTL of ${ttl} s exceeds the ${MAX_TTL_SECONDS} s limit`);
}

/** Encodes a request. `alloc` receives the payload size (use sodium_malloc for put). */
export function encodeRequest(req: Request, alloc?: Alloc): Frame {
  const w = new Writer();
  let type: number;
  switch (req.type) {
    case 'hello':
      type = MsgType.HELLO;
      w.u8(req.version).u8(0).bytes(req.publicKey);
      break;
    case 'stop':
      type = MsgType.STOP;
      break;
    case 'status':
      type = MsgType.STATUS;
      break;
    case 'register': {
      type = MsgType.REGISTER_ACTIVITY;
      const kind = Buffer.from(req.kind, 'utf8');
      w.u32(req.pid).u8(kind.length).bytes(kind);
      break;
    }
    case 'unregister':
      type = MsgType.UNREGISTER_ACTIVITY;
      w.u32(req.pid).bytes(req.token);
      break;
    case 'get':
    case 'forget':
      checkId(req.id, req.type);
      type = req.type === 'get' ? MsgType.GET : MsgType.FORGET;
      w.u8(req.id.length).bytes(req.id);
      break;
    case 'put': {
      checkId(req.id, 'put');
      if (req.key.length < 1 || req.key.length > MAX_KEY_BYTES) {
        throw new ProtocolError('MALFORMED_PAYLOAD', `put: key must be 1..${MAX_KEY_BYTES} bytes`);
      }
      checkTtl(req.ttl);
      const path = req.path === null ? Buffer.alloc(0) : Buffer.from(req.path, 'utf8');
      if (path.length > MAX_PATH_BYTES)
        throw new ProtocolError('MALFORMED_PAYLOAD', `put: path exceeds ${MAX_PATH_BYTES} bytes`);
      type = MsgType.PUT;
      w.u8(req.id.length).bytes(req.id).u16(req.key.length).bytes(req.key).u16(path.length).bytes(path);
      w.u8(req.ttl === null ? 0 : 1).i32(req.ttl ?? 0);
      break;
    }
    case 'forget-all':
      type = MsgType.FORGET_ALL;
      break;
    case 'list':
      type = MsgType.LIST;
      w.u16(req.offset);
      break;
  }
  return { type, payload: w.finish(alloc) };
}

/**
 * HELLO: the client's protocol version, flags and public key. Version 2 defines
 * no flag. Refusing unknown ones with their own error (not ignoring them) lets a
 * newer client probe for a feature and fall back. Another version's flags are its
 * own: the connection answers VERSION_MISMATCH.
 */
function decodeHello(r: Reader): Request {
  const version = r.u8('version');
  const flags = r.u8('flags');
  const publicKey = r.bytes(32, 'public key');
  if (version === PROTOCOL_VERSION && flags !== 0) {
    throw new ProtocolError(
      'UNKNOWN_FLAGS',
      `HELLO flags 0x${flags.toString(16).padStart(2, '0')} are not known to this agent (protocol ${PROTOCOL_VERSION} defines none)`,
    );
  }
  return { type: 'hello', version, publicKey };
}

/** REGISTER_ACTIVITY: a pid other than 0 and one of the known activity kinds. */
function decodeRegister(r: Reader): Request {
  const pid = r.u32('pid');
  const kindLen = r.u8('kind length');
  const kind = r.bytes(kindLen, 'kind').toString('latin1');
  if (!(ACTIVITY_KINDS as readonly string[]).includes(kind)) {
    r.end();
    const shown = /^[\x20-\x7e]{1,32}$/.test(kind) ? JSON.stringify(kind) : `(${kindLen} bytes)`;
    throw new ProtocolError(
      'UNKNOWN_KIND',
      `unknown activity kind ${shown}; expected one of ${ACTIVITY_KINDS.join(', ')}`,
    );
  }
  if (pid === 0) throw new ProtocolError('MALFORMED_PAYLOAD', 'register-activity: pid 0 is not a process');
  return { type: 'register', pid, kind: kind as ActivityKindName };
}

/** UNREGISTER_ACTIVITY: the pid and the token its registration returned. */
function decodeUnregister(r: Reader): Request {
  const pid = r.u32('pid');
  return { type: 'unregister', pid, token: r.bytes(TOKEN_BYTES, 'token') };
}

/** PUT: container id, key bytes, optional path, and a TTL behind a flag (0: the default, 1: the value). */
function decodePut(r: Reader, what: string): Request {
  const id = readId(r, what);
  const keyLen = r.u16('key length');
  if (keyLen < 1 || keyLen > MAX_KEY_BYTES)
    throw new ProtocolError('MALFORMED_PAYLOAD', `put: key length ${keyLen} is outside 1..${MAX_KEY_BYTES}`);
  const key = r.bytes(keyLen, 'key bytes');
  const path = readPath(r, what);
  const hasTtl = r.u8('TTL flag');
  const ttlValue = r.i32('TTL');
  if (hasTtl > 1) throw new ProtocolError('MALFORMED_PAYLOAD', `put: TTL flag must be 0 or 1, got ${hasTtl}`);
  if (hasTtl === 0 && ttlValue !== 0)
    throw new ProtocolError('MALFORMED_PAYLOAD', 'put: TTL value given with the "absent" flag');
  const ttl = hasTtl === 1 ? ttlValue : null;
  r.end();
  checkTtl(ttl);
  return { type: 'put', id, key, path, ttl };
}

/** One decoder per request type; `what` names the type in error messages. */
const requestDecoders = new Map<number, (r: Reader, what: string) => Request>([
  [MsgType.HELLO, decodeHello],
  [MsgType.STOP, () => ({ type: 'stop' })],
  [MsgType.STATUS, () => ({ type: 'status' })],
  [MsgType.REGISTER_ACTIVITY, decodeRegister],
  [MsgType.UNREGISTER_ACTIVITY, decodeUnregister],
  [MsgType.GET, (r, what) => ({ type: 'get', id: readId(r, what) })],
  [MsgType.FORGET, (r, what) => ({ type: 'forget', id: readId(r, what) })],
  [MsgType.PUT, decodePut],
  [MsgType.FORGET_ALL, () => ({ type: 'forget-all' })],
  [MsgType.LIST, (r) => ({ type: 'list', offset: r.u16('offset') })],
]);

/** Decodes a request frame (plain or the inner frame of a SEALED one). Views alias the payload. */
export function decodeRequest(frame: Frame): Request {
  const what = typeName(frame.type);
  const r = new Reader(frame.payload, what);
  const decode = requestDecoders.get(frame.type);
  if (decode === undefined) throw new ProtocolError('UNSUPPORTED_TYPE', `unsupported message type ${what}`);
  const req = decode(r, what);
  r.end();
  return req;
}

const LIST_ENTRY_FIXED = 1 + 2 + 4 + 4 + 4;

/** Encodes a reply. `alloc` receives the payload size (use sodium_malloc for cache-key). */
export function encodeReply(reply: Reply, alloc?: Alloc): Frame {
  const w = new Writer();
  let type: number;
  switch (reply.type) {
    case 'ack':
      type = MsgType.ACK;
      w.u32(reply.count);
      break;
    case 'hello-ok':
      type = MsgType.HELLO_OK;
      w.u8(reply.version).u8(0).bytes(reply.publicKey).u32(reply.pid);
      break;
    case 'token':
      type = MsgType.TOKEN;
      w.bytes(reply.token);
      break;
    case 'status':
      type = MsgType.STATUS_REPLY;
      w.bytes(Buffer.from(JSON.stringify(reply.status), 'utf8'));
      break;
    case 'cache-miss':
      type = MsgType.CACHE_MISS;
      break;
    case 'cache-key':
      type = MsgType.CACHE_KEY;
      w.u16(reply.key.length).bytes(reply.key).u32(reply.ttl);
      break;
    case 'list':
      type = MsgType.LIST_REPLY;
      w.u16(reply.total).u16(reply.offset).u16(reply.entries.length);
      for (const e of reply.entries) {
        const path = e.path === null ? Buffer.alloc(0) : Buffer.from(e.path, 'utf8');
        w.u8(e.id.length)
          .bytes(e.id)
          .u16(path.length)
          .bytes(path)
          .u32(e.ttl)
          .u32(clampU32(e.expiresInMs))
          .u32(clampU32(e.ageMs));
      }
      break;
    case 'error': {
      type = MsgType.ERROR;
      const msg = Buffer.from(reply.message, 'utf8').subarray(0, 1024);
      w.u16(reply.code).u16(msg.length).bytes(msg);
      break;
    }
  }
  if (w.length > MAX_PAYLOAD_BYTES - 64)
    throw new ProtocolError('INVALID_SIZE', `${reply.type} reply of ${w.length} bytes is too large`);
  return { type, payload: w.finish(alloc) };
}

function clampU32(n: number): number {
  return Math.max(0, Math.min(0xffffffff, Math.round(n)));
}

/** Bytes one list entry takes on the wire (so the agent can fill a reply page). */
export function listEntrySize(e: ListEntry): number {
  return LIST_ENTRY_FIXED + e.id.length + (e.path === null ? 0 : Buffer.byteLength(e.path, 'utf8'));
}

/** Decodes a reply frame. Views alias the payload. */
export function decodeReply(frame: Frame): Reply {
  const what = typeName(frame.type);
  const r = new Reader(frame.payload, what);
  let reply: Reply;
  switch (frame.type) {
    case MsgType.ACK:
      reply = { type: 'ack', count: r.u32('count') };
      break;
    case MsgType.HELLO_OK: {
      const version = r.u8('version');
      r.u8('flags');
      reply = { type: 'hello-ok', version, publicKey: r.bytes(32, 'public key'), pid: r.u32('pid') };
      break;
    }
    case MsgType.TOKEN:
      reply = { type: 'token', token: r.bytes(TOKEN_BYTES, 'token') };
      break;
    case MsgType.STATUS_REPLY: {
      let status: unknown;
      try {
        status = JSON.parse(r.utf8(frame.payload.length, 'status document'));
      } catch (err) {
        if (err instanceof ProtocolError) throw err;
        throw new ProtocolError('MALFORMED_PAYLOAD', 'status: not a JSON document');
      }
      if (typeof status !== 'object' || status === null || Array.isArray(status))
        throw new ProtocolError('MALFORMED_PAYLOAD', 'status: not a JSON object');
      reply = { type: 'status', status: status as Record<string, unknown> };
      break;
    }
    case MsgType.CACHE_MISS:
      reply = { type: 'cache-miss' };
      break;
    case MsgType.CACHE_KEY: {
      const n = r.u16('key length');
      if (n < 1 || n > MAX_KEY_BYTES)
        throw new ProtocolError('MALFORMED_PAYLOAD', `cache-key: key length ${n} is outside 1..${MAX_KEY_BYTES}`);
      reply = { type: 'cache-key', key: r.bytes(n, 'key bytes'), ttl: r.u32('TTL') };
      break;
    }
    case MsgType.LIST_REPLY: {
      const total = r.u16('total');
      const offset = r.u16('offset');
      const count = r.u16('count');
      const entries: ListEntry[] = [];
      for (let i = 0; i < count; i++) {
        const id = readId(r, what);
        const path = readPath(r, what);
        entries.push({ id, path, ttl: r.u32('TTL'), expiresInMs: r.u32('expires in'), ageMs: r.u32('age') });
      }
      reply = { type: 'list', total, offset, entries };
      break;
    }
    case MsgType.ERROR: {
      const code = r.u16('code');
      reply = { type: 'error', code, message: r.utf8(r.u16('message length'), 'message') };
      break;
    }
    default:
      throw new ProtocolError('UNSUPPORTED_TYPE', `unsupported reply type ${what}`);
  }
  r.end();
  return reply;
}
