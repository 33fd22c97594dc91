/**
 * The JSON form of the same messages (Content-Type / Accept:
 * application/json), for curl and for people. Field names are snake_case,
 * times are ISO 8601 strings, byte strings are standard base64 with padding.
 * The request decoder is as strict as the binary one: unknown fields, wrong
 * types and non-canonical base64 are errors that name the field.
 */
import type { Fail } from './codec.js';
import type { ErrorResponse, ShareRequest, ShareResponse, StatusResponse, TopologyResponse } from './messages.js';

const MAX_FIELD = 1024;

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function field(obj: Record<string, unknown>, name: string, fail: Fail): string {
  const v = obj[name];
  if (v === undefined) throw fail(`field "${name}" is missing`);
  if (typeof v !== 'string')
    throw fail(
      `field "${name}" must be a string, got ${v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v}`,
    );
  if (v.length > MAX_FIELD) throw fail(`field "${name}" is too long`);
  return v;
}

/** Strict standard base64 (with padding); re-encoding must give the same text. */
export function decodeBase64(text: string, name: string, fail: Fail): Buffer {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0)
    throw fail(`field "${name}" must be standard base64 with padding`);
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) throw fail(`field "${name}" is not canonical base64`);
  return bytes;
}

/** Parses and checks a JSON share request. */
export function decodeJsonShareRequest(body: Uint8Array, fail: Fail): ShareRequest {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw fail('the body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw fail('the body must be a JSON object');
  const obj = value as Record<string, unknown>;
  const op = field(obj, 'op', fail);
  const allowed = FIELDS[op];
  if (!allowed) throw fail('field "op" must be "create", "fetch" or "unpublish"');
  for (const key of Object.keys(obj))
    if (!allowed.includes(key)) throw fail(`unknown field "${key.slice(0, 40)}" for op "${op}"`);
  if (op === 'create') {
    return {
      op,
      publicKey: decodeBase64(field(obj, 'public_key', fail), 'public_key', fail),
      email: field(obj, 'email', fail),
    };
  }
  if (op === 'unpublish') {
    return {
      op,
      code: field(obj, 'code', fail),
      timestamp: decodeTime(field(obj, 'timestamp', fail), 'timestamp', fail),
      nonce: decodeBase64(field(obj, 'nonce', fail), 'nonce', fail),
      signature: decodeBase64(field(obj, 'signature', fail), 'signature', fail),
    };
  }
  return { op: 'fetch', code: field(obj, 'code', fail) };
}

const FIELDS: Record<string, string[] | undefined> = {
  create: ['op', 'public_key', 'email'],
  fetch: ['op', 'code'],
  unpublish: ['op', 'code', 'timestamp', 'nonce', 'signature'],
};

/** An ISO 8601 time as this encoding writes it (ms, Z); anything else is refused rather than guessed at, since a signature covers it. */
function decodeTime(text: string, name: string, fail: Fail): number {
  const ms = Date.parse(text);
  if (!Number.isFinite(ms) || ms < 0 || iso(ms) !== text)
    throw fail(`field "${name}" must be a time like 2030-01-01T00:00:00.000Z`);
  return ms;
}

export function shareResponseJson(res: ShareResponse): object {
  if (res.type === 'unpublished') return { type: 'unpublished', code: res.code, deleted_at: iso(res.deletedAt) };
  if (res.type === 'created') {
    return {
      type: 'created',
      code: res.code,
      expires_at: iso(res.expiresAt),
      verification: res.verification,
      message: res.message,
    };
  }
  return {
    type: 'fetched',
    code: res.code,
    public_key: Buffer.from(res.publicKey).toString('base64'),
    email: res.email,
    verified_at: iso(res.verifiedAt),
    fetch_count: res.fetchCount,
    expires_at: iso(res.expiresAt),
  };
}

export function topologyJson(t: TopologyResponse): object {
  return {
    cluster_id: t.clusterId,
    topology_version: t.topologyVersion,
    server_id: t.serverId,
    servers: t.servers.map((s) => ({ id: s.id, url: s.url, status: s.status })),
    routes: t.routes.map((r) => ({ owner: r.owner, primary: r.primary, failovers: r.failovers })),
    promoted_owners: t.promotedOwners,
  };
}

export function statusJson(s: StatusResponse): object {
  return { ...s };
}

export function errorJson(e: Omit<ErrorResponse, 'limit'> & { limit?: string | undefined }): object {
  const error: Record<string, unknown> = { code: e.code, message: e.message };
  if (e.retryAfter > 0) error.retry_after = e.retryAfter;
  if (e.limit) error.limit = e.limit;
  return { error };
}
