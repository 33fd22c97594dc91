/**
 * Client of the key server for the `stash` CLI: publish, fetch, unpublish,
 * topology and status over HTTP or HTTPS with the binary encoding. Certificates are
 * verified by Node's default agent (NODE_EXTRA_CA_CERTS adds a private CA), or
 * against `ca` when given. Failures are typed: CodeTypoError (checked locally
 * before any request), KeyServerError with SHARE_NOT_FOUND / SHARE_PENDING /
 * SHARE_EXPIRED / ..., RateLimitedError (retryAfter), ServerUnreachableError,
 * ServerUntrustedError, ServerProtocolError. Does not load Koa.
 */
import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import {
  CodeTypoError,
  KeyServerError,
  RateLimitedError,
  ServerProtocolError,
  ServerUnreachableError,
  ServerUntrustedError,
  type LimitName,
} from './errors.js';
import { checkKeyServerUrl } from '../config/server-url.js';
import { UNTRUSTED_CERTIFICATE_CODES } from './tls/certificate-errors.js';
import { parseShareCode } from './share-code.js';
import { statusSignatureHeaders } from './replication/signature.js';
import { unpublishSignedBytes } from './wire/unpublish-signature.js';
import {
  BINARY_MEDIA_TYPE,
  UNPUBLISH_NONCE_BYTES,
  decodeError,
  decodeShareResponse,
  decodeStatus,
  decodeTopology,
  encodeShareRequest,
  type ShareRequest,
  type ShareResponse,
  type StatusResponse,
  type TopologyResponse,
  type Verification,
} from './wire/messages.js';

export interface ClientOptions {
  /** Per request (default 15 s). */
  timeoutMs?: number;
  /** Extra trusted CA certificate(s) in PEM, replacing the defaults for this call. */
  ca?: string | Buffer;
  /** Extra request headers (a signed status request). */
  headers?: Record<string, string>;
  /** Headers computed from the request body (a server forwarding a request signs it: forward.ts). */
  signBody?: (body: Buffer) => Record<string, string>;
}

export interface Published {
  code: string;
  expiresAt: Date;
  verification: Verification;
  message: string;
}

export interface FetchedShare {
  code: string;
  publicKey: Buffer;
  email: string;
  verifiedAt: Date;
  fetchCount: number;
  expiresAt: Date;
}

const MAX_RESPONSE = 64 * 1024;
const limitNames: readonly string[] = [
  'requests-per-ip',
  'emails-per-address',
  'emails-per-ip',
  'unpublishes-per-ip',
] satisfies LimitName[];
const protocolFail = (message: string) => new ServerProtocolError(`unexpected answer from the key server: ${message}`);

const untrustedCodes = UNTRUSTED_CERTIFICATE_CODES;

/**
 * True for a TLS handshake that met something else: OpenSSL reads the first
 * bytes of a plain HTTP answer ("HTTP/1.1 400") as a record of an unknown
 * version ("wrong version number", "packet length too long"), reported as
 * EPROTO.
 */
function notTls(err: NodeJS.ErrnoException): boolean {
  return (
    err.code === 'EPROTO' ||
    /wrong version number|packet length too long|unknown protocol|http request/i.test(err.message)
  );
}

/** `path` under the server's base URL; `serverUrl` may be the base or its /v1/share endpoint (checkKeyServerUrl). */
function endpoint(serverUrl: string, path: string): URL {
  const base = checkKeyServerUrl(serverUrl, 'the key server URL', (m) => new KeyServerError('USAGE', m));
  return new URL(`${new URL(base).href.replace(/\/+$/, '')}${path}`);
}

interface RawResponse {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

function send(url: URL, method: 'GET' | 'POST', body: Buffer | undefined, opts: ClientOptions): Promise<RawResponse> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const where = `${url.protocol}//${url.host}`;
  return new Promise<RawResponse>((resolve, reject) => {
    const headers: Record<string, string> = { ...opts.headers, Accept: BINARY_MEDIA_TYPE };
    if (body) {
      headers['Content-Type'] = BINARY_MEDIA_TYPE;
      headers['Content-Length'] = String(body.length);
      if (opts.signBody) Object.assign(headers, opts.signBody(body));
    }
    const options = { method, headers, timeout: timeoutMs, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) };
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_RESPONSE) req.destroy(protocolFail(`response larger than ${MAX_RESPONSE} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', (err) => reject(err));
    });
    const deadline = setTimeout(
      () => req.destroy(new ServerUnreachableError(`no answer from ${where} within ${timeoutMs / 1000} seconds`)),
      timeoutMs,
    );
    req.on('timeout', () =>
      req.destroy(new ServerUnreachableError(`no answer from ${where} within ${timeoutMs / 1000} seconds`)),
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(deadline);
      if (err instanceof KeyServerError) reject(err);
      else if (err.code && untrustedCodes.has(err.code))
        reject(new ServerUntrustedError(`the certificate of ${where} is not trusted (${err.code})`, err));
      else if (url.protocol === 'https:' && notTls(err)) {
        reject(
          new ServerProtocolError(
            `the server at ${where} does not speak TLS (is it a plain http:// server? then use http://${url.host})`,
          ),
        );
      } else
        reject(new ServerUnreachableError(`cannot reach the key server at ${where} (${err.code ?? err.message})`, err));
    });
    req.on('close', () => clearTimeout(deadline));
    req.end(body);
  });
}

function isBinary(res: RawResponse): boolean {
  return (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === BINARY_MEDIA_TYPE;
}

function failure(res: RawResponse): Error {
  if (!isBinary(res)) return protocolFail(`HTTP ${res.status} without a stash error body`);
  const e = decodeError(res.body, protocolFail);
  if (e.code === 'CODE_TYPO') return new CodeTypoError(e.message);
  if (e.code === 'RATE_LIMITED') {
    const limit = limitNames.includes(e.limit as LimitName) ? (e.limit as LimitName) : undefined;
    return new RateLimitedError(e.message, e.retryAfter || Number(res.headers['retry-after']) || 1, limit);
  }
  return new KeyServerError(e.code, e.message);
}

async function call(
  serverUrl: string,
  method: 'GET' | 'POST',
  path: string,
  body: Buffer | undefined,
  opts: ClientOptions,
): Promise<Buffer> {
  const res = await send(endpoint(serverUrl, path), method, body, opts);
  if (res.status < 200 || res.status >= 300) throw failure(res);
  if (!isBinary(res)) throw protocolFail(`content type ${String(res.headers['content-type']).slice(0, 60)}`);
  return res.body;
}

/** One POST /v1/share: `req` in the binary encoding, the answer decoded (a server forwarding a request uses it as it is). */
export async function exchange(serverUrl: string, req: ShareRequest, opts: ClientOptions = {}): Promise<ShareResponse> {
  const res = decodeShareResponse(
    await call(serverUrl, 'POST', '/v1/share', encodeShareRequest(req), opts),
    protocolFail,
  );
  const expected = req.op === 'create' ? 'created' : req.op === 'fetch' ? 'fetched' : 'unpublished';
  if (res.type !== expected) throw protocolFail(`a ${res.type} answer to a ${req.op} request`);
  return res;
}

/** Publishes a 65-byte identity public key for `email`. */
export async function publish(
  serverUrl: string,
  publicKey: Uint8Array,
  email: string,
  opts: ClientOptions = {},
): Promise<Published> {
  const res = await exchange(serverUrl, { op: 'create', publicKey, email }, opts);
  if (res.type !== 'created') throw protocolFail('a fetch answer to a publish');
  return { code: res.code, expiresAt: new Date(res.expiresAt), verification: res.verification, message: res.message };
}

/** Fetches a verified share; the code is checked locally first (CodeTypoError). */
export async function fetchShare(serverUrl: string, code: string, opts: ClientOptions = {}): Promise<FetchedShare> {
  const parsed = parseShareCode(code);
  const res = await exchange(serverUrl, { op: 'fetch', code: parsed.display }, opts);
  if (res.type !== 'fetched') throw protocolFail('a publish answer to a fetch');
  if (res.code !== parsed.display) throw protocolFail('the answer is for another share code');
  return {
    code: res.code,
    publicKey: Buffer.from(res.publicKey),
    email: res.email,
    verifiedAt: new Date(res.verifiedAt),
    fetchCount: res.fetchCount,
    expiresAt: new Date(res.expiresAt),
  };
}

/**
 * Deletes a share before its expiry: `sign` gets the bytes to sign
 * (wire/unpublish-signature.ts) and returns the Ed25519 signature of the
 * identity whose key the share holds. The code is checked locally first
 * (CodeTypoError); a fresh timestamp and nonce go with every call.
 */
export async function unpublish(
  serverUrl: string,
  code: string,
  sign: (signed: Buffer) => Uint8Array,
  opts: ClientOptions & { nowMs?: number } = {},
): Promise<{ code: string; deletedAt: Date }> {
  const parsed = parseShareCode(code);
  const timestamp = opts.nowMs ?? Date.now();
  const nonce = randomBytes(UNPUBLISH_NONCE_BYTES);
  const signature = sign(unpublishSignedBytes(parsed.canonical, timestamp, nonce));
  const res = await exchange(serverUrl, { op: 'unpublish', code: parsed.display, timestamp, nonce, signature }, opts);
  if (res.type !== 'unpublished') throw protocolFail('another answer to an unpublish');
  if (res.code !== parsed.display) throw protocolFail('the answer is for another share code');
  return { code: res.code, deletedAt: new Date(res.deletedAt) };
}

/** The server's public topology (servers, routes, promoted owners). */
export async function topology(serverUrl: string, opts: ClientOptions = {}): Promise<TopologyResponse> {
  return decodeTopology(await call(serverUrl, 'GET', '/v1/topology', undefined, opts), protocolFail);
}

/**
 * The server's status counters. Only replication_pending and
 * replication_last_sequence are given to callers other than loopback; `sign`
 * (the cluster's replication token and id) gets the rest from anywhere. The
 * fields a server leaves out read as 0.
 */
export async function status(
  serverUrl: string,
  opts: ClientOptions & { sign?: { token: string; clusterId: string } } = {},
): Promise<StatusResponse> {
  const { sign, ...rest } = opts;
  const signed = sign
    ? { ...rest, headers: { ...rest.headers, ...statusSignatureHeaders(sign.token, sign.clusterId, Date.now()) } }
    : rest;
  const { unknown: _unknown, ...fields } = decodeStatus(
    await call(serverUrl, 'GET', '/v1/status', undefined, signed),
    protocolFail,
  );
  return fields;
}
