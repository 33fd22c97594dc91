/**
 * The messages of the key server's HTTP API and their binary encoding
 * (media type application/vnd.stash.v1+binary), documented byte by byte in
 * docs/http-api.md. Pure: no I/O. Every message starts with the encoding
 * version (1) and a message type byte.
 */
import { Reader, Writer, type Fail } from './codec.js';

export const BINARY_MEDIA_TYPE = 'application/vnd.stash.v1+binary';
export const JSON_MEDIA_TYPE = 'application/json';
export const WIRE_VERSION = 1;

export const MessageType = {
  createRequest: 0x01,
  fetchRequest: 0x02,
  unpublishRequest: 0x03,
  created: 0x81,
  fetched: 0x82,
  topology: 0x83,
  status: 0x84,
  unpublished: 0x85,
  error: 0xee,
} as const;

export type Verification = 'sent' | 'printed' | 'failed';
const verificationCodes: Record<Verification, number> = { sent: 1, printed: 2, failed: 3 };

export type TopologyStatus = 'active' | 'standby' | 'promoted' | 'disabled';
const statusCodes: Record<TopologyStatus, number> = { active: 1, standby: 2, promoted: 3, disabled: 4 };

/** Bytes of the nonce and of the Ed25519 signature of an unpublish request. */
export const UNPUBLISH_NONCE_BYTES = 16;
export const UNPUBLISH_SIGNATURE_BYTES = 64;

/**
 * A publisher's request to delete a share before its expiry, signed with the
 * Ed25519 key the share holds (wire/unpublish-signature.ts says over what).
 */
export interface UnpublishRequest {
  op: 'unpublish';
  code: string;
  /** When the request was signed (ms since the epoch, the publisher's clock). */
  timestamp: number;
  nonce: Uint8Array;
  signature: Uint8Array;
}

export type ShareRequest =
  | { op: 'create'; publicKey: Uint8Array; email: string }
  | { op: 'fetch'; code: string }
  | UnpublishRequest;

export interface CreatedResponse {
  type: 'created';
  code: string;
  expiresAt: number;
  verification: Verification;
  message: string;
}

export interface FetchedResponse {
  type: 'fetched';
  code: string;
  publicKey: Uint8Array;
  email: string;
  verifiedAt: number;
  fetchCount: number;
  expiresAt: number;
}

export interface UnpublishedResponse {
  type: 'unpublished';
  code: string;
  deletedAt: number;
}

export type ShareResponse = CreatedResponse | FetchedResponse | UnpublishedResponse;

export interface TopologyResponse {
  clusterId: string;
  topologyVersion: number;
  serverId: number;
  servers: Array<{ id: number; url: string; status: TopologyStatus }>;
  routes: Array<{ owner: number; primary: number; failovers: number[] }>;
  promotedOwners: number[];
}

/** Status fields by wire id; decoders skip ids they do not know. */
export const statusFields = {
  replication_pending: 1,
  replication_last_sequence: 2,
  shares_live: 3,
  shares_pending: 4,
  store_bytes: 5,
  uptime_seconds: 6,
  server_id: 7,
  origin_epoch: 8,
  store_skipped_ranges: 9,
  store_skipped_bytes: 10,
  config_loaded_at: 11,
} as const;
export type StatusField = keyof typeof statusFields;
export type StatusResponse = Record<StatusField, number>;

export interface ErrorResponse {
  code: string;
  message: string;
  /** Seconds; 0 when not rate limited. */
  retryAfter: number;
  /** Which rate limit was hit ("" when none). */
  limit: string;
}

function header(r: Reader, fail: Fail, expected: readonly number[]): number {
  const version = r.u8('version');
  if (version !== WIRE_VERSION)
    throw fail(`unsupported encoding version ${version} (this side speaks ${WIRE_VERSION})`);
  const type = r.u8('message type');
  if (!expected.includes(type)) throw fail(`unexpected message type 0x${type.toString(16).padStart(2, '0')}`);
  return type;
}

// ---- requests -------------------------------------------------------------

export function encodeShareRequest(req: ShareRequest): Buffer {
  const w = new Writer().u8(WIRE_VERSION);
  if (req.op === 'create') {
    if (req.publicKey.length > 255) throw new RangeError('public key too long');
    return w.u8(MessageType.createRequest).u8(req.publicKey.length).bytes(req.publicKey).text(req.email, 1).finish();
  }
  if (req.op === 'unpublish') {
    if (req.nonce.length > 255 || req.signature.length > 255) throw new RangeError('nonce or signature too long');
    return w
      .u8(MessageType.unpublishRequest)
      .text(req.code, 1)
      .u64(req.timestamp)
      .u8(req.nonce.length)
      .bytes(req.nonce)
      .u8(req.signature.length)
      .bytes(req.signature)
      .finish();
  }
  return w.u8(MessageType.fetchRequest).text(req.code, 1).finish();
}

/** Strict decoder: wrong version, type, truncation or trailing bytes fail. */
export function decodeShareRequest(bytes: Uint8Array, fail: Fail): ShareRequest {
  const r = new Reader(bytes, fail, 'request');
  const type = header(r, fail, [MessageType.createRequest, MessageType.fetchRequest, MessageType.unpublishRequest]);
  let req: ShareRequest;
  if (type === MessageType.createRequest) {
    const keyLength = r.u8('public key length');
    const publicKey = Buffer.from(r.bytesOf(keyLength, 'public key'));
    req = { op: 'create', publicKey, email: r.text('email', 1) };
  } else if (type === MessageType.unpublishRequest) {
    const code = r.text('share code', 1);
    const timestamp = r.u64('timestamp');
    const nonce = Buffer.from(r.bytesOf(r.u8('nonce length'), 'nonce'));
    const signature = Buffer.from(r.bytesOf(r.u8('signature length'), 'signature'));
    req = { op: 'unpublish', code, timestamp, nonce, signature };
  } else {
    req = { op: 'fetch', code: r.text('share code', 1) };
  }
  r.end();
  return req;
}

// ---- responses ------------------------------------------------------------

export function encodeShareResponse(res: ShareResponse): Buffer {
  const w = new Writer().u8(WIRE_VERSION);
  if (res.type === 'created') {
    return w
      .u8(MessageType.created)
      .text(res.code, 1)
      .u64(res.expiresAt)
      .u8(verificationCodes[res.verification])
      .text(res.message, 2)
      .finish();
  }
  if (res.type === 'unpublished') return w.u8(MessageType.unpublished).text(res.code, 1).u64(res.deletedAt).finish();
  return w
    .u8(MessageType.fetched)
    .text(res.code, 1)
    .u8(res.publicKey.length)
    .bytes(res.publicKey)
    .text(res.email, 1)
    .u64(res.verifiedAt)
    .u32(res.fetchCount)
    .u64(res.expiresAt)
    .finish();
}

export function decodeShareResponse(bytes: Uint8Array, fail: Fail): ShareResponse {
  const r = new Reader(bytes, fail, 'response');
  const type = header(r, fail, [MessageType.created, MessageType.fetched, MessageType.unpublished]);
  let res: ShareResponse;
  if (type === MessageType.unpublished) {
    res = { type: 'unpublished', code: r.text('share code', 1), deletedAt: r.u64('deleted_at') };
  } else if (type === MessageType.created) {
    const code = r.text('share code', 1);
    const expiresAt = r.u64('expires_at');
    const v = r.u8('verification');
    const verification = (Object.keys(verificationCodes) as Verification[]).find((k) => verificationCodes[k] === v);
    if (!verification) throw fail(`response: unknown verification state ${v}`);
    res = { type: 'created', code, expiresAt, verification, message: r.text('message', 2) };
  } else {
    const code = r.text('share code', 1);
    const publicKey = Buffer.from(r.bytesOf(r.u8('public key length'), 'public key'));
    const email = r.text('email', 1);
    res = {
      type: 'fetched',
      code,
      publicKey,
      email,
      verifiedAt: r.u64('verified_at'),
      fetchCount: r.u32('fetch_count'),
      expiresAt: r.u64('expires_at'),
    };
  }
  r.end();
  return res;
}

export function encodeTopology(t: TopologyResponse): Buffer {
  const w = new Writer()
    .u8(WIRE_VERSION)
    .u8(MessageType.topology)
    .text(t.clusterId, 1)
    .u32(t.topologyVersion)
    .u8(t.serverId);
  w.u8(t.servers.length);
  for (const s of t.servers) w.u8(s.id).u8(statusCodes[s.status]).text(s.url, 2);
  w.u8(t.routes.length);
  for (const route of t.routes) {
    w.u8(route.owner).u8(route.primary).u8(route.failovers.length);
    for (const f of route.failovers) w.u8(f);
  }
  w.u8(t.promotedOwners.length);
  for (const p of t.promotedOwners) w.u8(p);
  return w.finish();
}

export function decodeTopology(bytes: Uint8Array, fail: Fail): TopologyResponse {
  const r = new Reader(bytes, fail, 'topology');
  header(r, fail, [MessageType.topology]);
  const clusterId = r.text('cluster_id', 1);
  const topologyVersion = r.u32('topology_version');
  const serverId = r.u8('server_id');
  const servers: TopologyResponse['servers'] = [];
  for (let n = r.u8('server count'); n > 0; n--) {
    const id = r.u8('server id');
    const code = r.u8('server status');
    const status = (Object.keys(statusCodes) as TopologyStatus[]).find((k) => statusCodes[k] === code);
    if (!status) throw fail(`topology: unknown server status ${code}`);
    servers.push({ id, status, url: r.text('server url', 2) });
  }
  const routes: TopologyResponse['routes'] = [];
  for (let n = r.u8('route count'); n > 0; n--) {
    const owner = r.u8('route owner');
    const primary = r.u8('route primary');
    const failovers: number[] = [];
    for (let k = r.u8('failover count'); k > 0; k--) failovers.push(r.u8('failover id'));
    routes.push({ owner, primary, failovers });
  }
  const promotedOwners: number[] = [];
  for (let n = r.u8('promoted owner count'); n > 0; n--) promotedOwners.push(r.u8('promoted owner'));
  r.end();
  return { clusterId, topologyVersion, serverId, servers, routes, promotedOwners };
}

/** Encodes the fields present in `s` (a caller that may not see them all gets fewer). */
export function encodeStatus(s: Partial<StatusResponse>): Buffer {
  const names = (Object.keys(statusFields) as StatusField[]).filter((n) => s[n] !== undefined);
  const w = new Writer().u8(WIRE_VERSION).u8(MessageType.status).u8(names.length);
  for (const name of names) w.u8(statusFields[name]).u64(s[name]!);
  return w.finish();
}

/** Decodes a status payload; unknown field ids are skipped, missing ones are 0. */
export function decodeStatus(bytes: Uint8Array, fail: Fail): StatusResponse & { unknown: number } {
  const r = new Reader(bytes, fail, 'status');
  header(r, fail, [MessageType.status]);
  const out = Object.fromEntries(Object.keys(statusFields).map((k) => [k, 0])) as StatusResponse;
  let unknown = 0;
  for (let n = r.u8('field count'); n > 0; n--) {
    const id = r.u8('field id');
    const value = r.u64('field value');
    const name = (Object.keys(statusFields) as StatusField[]).find((k) => statusFields[k] === id);
    if (name) out[name] = value;
    else unknown++;
  }
  r.end();
  return { ...out, unknown };
}

export function encodeError(e: ErrorResponse): Buffer {
  return new Writer()
    .u8(WIRE_VERSION)
    .u8(MessageType.error)
    .text(e.code.slice(0, 64), 1)
    .text(e.message.slice(0, 2000), 2)
    .u32(e.retryAfter)
    .text(e.limit.slice(0, 64), 1)
    .finish();
}

export function decodeError(bytes: Uint8Array, fail: Fail): ErrorResponse {
  const r = new Reader(bytes, fail, 'error response');
  header(r, fail, [MessageType.error]);
  const res = {
    code: r.text('code', 1),
    message: r.text('message', 2),
    retryAfter: r.u32('retry_after'),
    limit: r.text('limit', 1),
  };
  r.end();
  return res;
}
