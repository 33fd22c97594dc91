/**
 * Request bodies of the HTTP benchmarks. The public key of a share is always
 * 65 bytes, so `--payload-bytes` cannot grow the key: it sets the size of the
 * request body instead. 0 sends the compact binary encoding the `stash` CLI
 * sends; N > 0 sends the JSON encoding padded with trailing whitespace (valid
 * JSON) to N bytes, or its natural size when that is larger.
 */
import { generateKeyPairSync } from 'node:crypto';
import { BINARY_MEDIA_TYPE, JSON_MEDIA_TYPE, decodeShareResponse, encodeShareRequest } from '../wire/messages.js';

/** The server refuses bodies above this (docs/key-server.md, limits). */
export const MAX_BODY_BYTES = 4096;

export type Encoding = 'binary' | 'json';

export function encodingFor(payloadBytes: number): Encoding {
  return payloadBytes === 0 ? 'binary' : 'json';
}

function padJson(value: object, payloadBytes: number): Buffer {
  const text = JSON.stringify(value);
  return Buffer.from(text.length >= payloadBytes ? text : text + ' '.repeat(payloadBytes - text.length));
}

export function createBody(publicKey: Buffer, email: string, payloadBytes: number): Buffer {
  if (payloadBytes === 0) return encodeShareRequest({ op: 'create', publicKey, email });
  return padJson({ op: 'create', public_key: publicKey.toString('base64'), email }, payloadBytes);
}

export function fetchBody(code: string, payloadBytes: number): Buffer {
  if (payloadBytes === 0) return encodeShareRequest({ op: 'fetch', code });
  return padJson({ op: 'fetch', code }, payloadBytes);
}

export function shareHeaders(payloadBytes: number): Record<string, string> {
  const type = payloadBytes === 0 ? BINARY_MEDIA_TYPE : JSON_MEDIA_TYPE;
  return { 'Content-Type': type, Accept: type };
}

/** The share code in a 201 answer to a publish, in either encoding. */
export function createdCode(body: Buffer, payloadBytes: number): string {
  if (payloadBytes > 0) return String((JSON.parse(body.toString('utf8')) as { code?: unknown }).code);
  const res = decodeShareResponse(body, (m) => new Error(m));
  if (res.type !== 'created') throw new Error('not a created answer');
  return res.code;
}

/** A valid identity public key (0x01 | X25519 | Ed25519) from node:crypto key pairs. */
export function benchPublicKey(): Buffer {
  const raw = (type: 'x25519' | 'ed25519') => {
    const der = generateKeyPairSync(type as 'x25519').publicKey.export({ format: 'der', type: 'spki' });
    return der.subarray(der.length - 32);
  };
  return Buffer.concat([Buffer.from([1]), raw('x25519'), raw('ed25519')]);
}

export function benchEmail(i: number): string {
  return `bench-${i}@example.org`;
}
