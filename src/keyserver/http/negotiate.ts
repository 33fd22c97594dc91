/**
 * Which encoding a request uses and which one its response gets.
 * Requests: Content-Type application/vnd.stash.v1+binary or application/json
 * (anything else: 415). Responses: what Accept names; without a preference,
 * the request's own encoding for POST, and binary (the native protocol) for GET.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { KeyServerError } from '../errors.js';
import { BINARY_MEDIA_TYPE, JSON_MEDIA_TYPE } from '../wire/messages.js';

export type Encoding = 'binary' | 'json';

function mediaType(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return header.split(';')[0]!.trim().toLowerCase();
}

/** The encoding of a request body; throws UNSUPPORTED_MEDIA_TYPE. */
export function requestEncoding(headers: IncomingHttpHeaders): Encoding {
  const type = mediaType(headers['content-type']);
  if (type === BINARY_MEDIA_TYPE) return 'binary';
  if (type === JSON_MEDIA_TYPE) return 'json';
  throw new KeyServerError(
    'UNSUPPORTED_MEDIA_TYPE',
    `send the body as ${BINARY_MEDIA_TYPE} or ${JSON_MEDIA_TYPE}${type ? `, not ${type.slice(0, 80)}` : ' (Content-Type is missing)'}`,
  );
}

/** The response encoding; never throws (also used for error responses). */
export function responseEncoding(headers: IncomingHttpHeaders, method: string): Encoding {
  const accept = (headers.accept ?? '').toLowerCase();
  if (accept.includes(BINARY_MEDIA_TYPE)) return 'binary';
  if (accept.includes(JSON_MEDIA_TYPE)) return 'json';
  if (method === 'POST' && mediaType(headers['content-type']) === JSON_MEDIA_TYPE) return 'json';
  return 'binary';
}

/**
 * True for a browser: Accept names text/html and neither of the API's media
 * types. The stash client asks for binary, curl sends * / *: both keep the
 * API's answers; a browser gets small HTML pages instead of a binary file.
 */
export function wantsHtml(headers: IncomingHttpHeaders): boolean {
  const accept = (headers.accept ?? '').toLowerCase();
  return accept.includes('text/html') && !accept.includes(BINARY_MEDIA_TYPE) && !accept.includes(JSON_MEDIA_TYPE);
}
