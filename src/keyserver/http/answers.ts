/**
 * Answers as plain data (status, headers, content type, body), so that the
 * Koa routes and the fetch fast path (fast-fetch.ts) write the same bytes:
 * one function decides what an answer is, and two small writers put it on
 * a Koa context or straight on a node:http response.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { encodeError, BINARY_MEDIA_TYPE } from '../wire/messages.js';
import { errorJson } from '../wire/json.js';
import { responseEncoding, wantsHtml } from './negotiate.js';
import { PAGE_CSP, errorPage, invalidLinkPage, notFoundPage } from './pages.js';

/** What Koa makes of `ctx.type = 'application/json'`; spelled out so the fast path sends the same. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
export const HTML_CONTENT_TYPE = 'text/html; charset=utf-8';

/** Sent with every answer of the key server, before any other header. */
export const COMMON_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['X-Content-Type-Options', 'nosniff'],
  ['Cache-Control', 'no-store'],
  ['Referrer-Policy', 'no-referrer'],
];

/** What the caller may see of a failure (error-middleware.ts's classify decides it; failureAnswer writes it). */
export interface HttpFailure {
  status: number;
  code: string;
  message: string;
  retryAfter: number;
  limit: string | undefined;
  headers: Record<string, string>;
}

export interface Answer {
  status: number;
  /** Headers beyond COMMON_HEADERS, Content-Type and Content-Length, in order. */
  headers: Array<[string, string]>;
  type: string;
  body: Buffer | string;
}

/** Paths whose every answer is a page: the verification link's, and the manage link's (http/manage-routes.ts). */
function pagePath(path: string): 'verify' | 'manage' | undefined {
  if (path === '/verify' || path.startsWith('/verify/')) return 'verify';
  if (path === '/manage' || path.startsWith('/manage/')) return 'manage';
  return undefined;
}

/** A failure in the encoding the caller asked for (HTML on /verify and for browsers). */
export function failureAnswer(f: HttpFailure, path: string, method: string, headers: IncomingHttpHeaders): Answer {
  const out: Array<[string, string]> = Object.entries(f.headers);
  if (f.retryAfter > 0) out.push(['Retry-After', String(f.retryAfter)]);
  // After a refused body the rest of it may still be arriving: do not reuse the connection.
  if (f.status === 408 || f.status === 413 || f.status === 400) out.push(['Connection', 'close']);
  const page = pagePath(path);
  if (page || wantsHtml(headers)) {
    // Verification and manage pages, and any path a browser asks for: HTML rather than a binary download.
    out.push(['Content-Security-Policy', PAGE_CSP], ['X-Frame-Options', 'DENY']);
    const notFound = page === 'verify' ? invalidLinkPage() : notFoundPage();
    const html =
      f.status === 404 ? notFound : errorPage(f.status === 429 ? 'Too many requests' : 'Request failed', f.message);
    return { status: f.status, headers: out, type: HTML_CONTENT_TYPE, body: html };
  }
  if (responseEncoding(headers, method) === 'json') {
    const body = JSON.stringify(
      errorJson({ code: f.code, message: f.message, retryAfter: f.retryAfter, limit: f.limit }),
    );
    return { status: f.status, headers: out, type: JSON_CONTENT_TYPE, body };
  }
  const body = encodeError({ code: f.code, message: f.message, retryAfter: f.retryAfter, limit: f.limit ?? '' });
  return { status: f.status, headers: out, type: BINARY_MEDIA_TYPE, body };
}

/** Puts an answer on a Koa context (COMMON_HEADERS are set by the app's first middleware). */
export function sendAnswer(ctx: Context, a: Answer): void {
  ctx.status = a.status;
  for (const [k, v] of a.headers) ctx.set(k, v);
  ctx.type = a.type;
  ctx.body = a.body;
}

/**
 * Writes an answer on a bare node:http response with the headers in the
 * order Koa would set them (common ones, the answer's own, Content-Type,
 * Content-Length). Tests compare both writers byte for byte.
 */
export function writeAnswer(res: ServerResponse, a: Answer): void {
  const body = typeof a.body === 'string' ? Buffer.from(a.body) : a.body;
  const flat: string[] = [];
  for (const [k, v] of COMMON_HEADERS) flat.push(k, v);
  for (const [k, v] of a.headers) flat.push(k, v);
  flat.push('Content-Type', a.type, 'Content-Length', String(body.length));
  res.writeHead(a.status, flat);
  // As a latin1 string (same bytes), node:http sends head and body in one write instead of a writev.
  res.end(body.toString('latin1'), 'latin1');
}

/** Header lists of fetched answers, by content type, then body length (a few distinct lengths; bounded). */
const fetchedHeads = new Map<string, Map<number, string[]>>();
const FETCHED_HEADS_KEPT = 256;

/**
 * Writes a fetched answer (status 200, `body` one character per byte) with
 * exactly writeAnswer's headers; the header list of each type and length is
 * built once. Head and body go out in one write.
 */
export function writeFetched(res: ServerResponse, type: string, body: string): void {
  let byLength = fetchedHeads.get(type);
  if (byLength === undefined) {
    byLength = new Map();
    fetchedHeads.set(type, byLength);
  }
  let flat = byLength.get(body.length);
  if (flat === undefined) {
    if (byLength.size >= FETCHED_HEADS_KEPT) byLength.clear();
    flat = [];
    for (const [k, v] of COMMON_HEADERS) flat.push(k, v);
    flat.push('Content-Type', type, 'Content-Length', String(body.length));
    byLength.set(body.length, flat);
  }
  res.writeHead(200, flat);
  res.end(body, 'latin1');
}
