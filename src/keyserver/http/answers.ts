/**
 * Answers as plain data (status, headers, content type, body), so that the
 * Koa routes and the front on the raw connection (fetch-front.ts, which
 * writes the bytes node:http would) send the same answers: one function
 * decides what an answer is.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Context } from 'koa';
import { encodeError, BINARY_MEDIA_TYPE } from '../wire/messages.js';
import { errorJson } from '../wire/json.js';
import { responseEncoding, wantsHtml } from './negotiate.js';
import { PAGE_CSP, errorPage, invalidLinkPage, notFoundPage } from './pages.js';

/** What Koa makes of `ctx.type = 'application/json'`; spelled out so the front sends the same. */
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
