/**
 * One signed POST of a replication batch to a peer's /v1/replicate URL, and
 * the answer turned into an ack or a typed error. Shared by the outbound
 * worker and by resync-peer.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { KeyServerError } from '../errors.js';
import { BINARY_MEDIA_TYPE, decodeError } from '../wire/messages.js';
import { decodeAck, encodeBatch, type ReplicateAck, type ReplicateBatch } from './batch.js';
import { signatureHeaders } from './signature.js';
import { UNTRUSTED_CERTIFICATE_CODES } from '../tls/certificate-errors.js';

const MAX_ANSWER = 64 * 1024;

/** A failed replication request; `status` 0 when the peer could not be reached. */
export class ReplicationSendError extends KeyServerError {
  constructor(
    code: string,
    message: string,
    readonly status: number,
  ) {
    super(code, message);
  }
}

const protocolFail = (message: string) =>
  new ReplicationSendError('REPLICATION_PROTOCOL', `unexpected answer from the peer: ${message}`, 0);

/** Signs and sends `batch`; resolves with the peer's ack. */
export function sendBatch(
  peerUrl: string,
  token: string,
  batch: ReplicateBatch,
  opts: { nowMs: number; timeoutMs?: number; signal?: AbortSignal },
): Promise<ReplicateAck> {
  const body = encodeBatch(batch);
  const url = new URL(peerUrl);
  const headers = {
    'Content-Type': BINARY_MEDIA_TYPE,
    Accept: BINARY_MEDIA_TYPE,
    'Content-Length': String(body.length),
    ...signatureHeaders(token, batch.clusterId, body, opts.nowMs),
  };
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return new Promise<ReplicateAck>((resolve, reject) => {
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
      url,
      { method: 'POST', headers, timeout: timeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER) req.destroy(protocolFail('answer too large'));
          else chunks.push(c);
        });
        res.on('error', reject);
        res.on('end', () => {
          const answer = Buffer.concat(chunks);
          const status = res.statusCode ?? 0;
          const binary = (res.headers['content-type'] ?? '').split(';')[0]!.trim() === BINARY_MEDIA_TYPE;
          try {
            if (status === 200 && binary) return resolve(decodeAck(answer, protocolFail));
            if (binary) {
              const e = decodeError(answer, protocolFail);
              return reject(new ReplicationSendError(e.code, `${e.code}: ${e.message}`, status));
            }
            reject(new ReplicationSendError('REPLICATION_PROTOCOL', `HTTP ${status} without a stash answer`, status));
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('timeout', () =>
      req.destroy(new ReplicationSendError('PEER_UNREACHABLE', `no answer within ${timeoutMs / 1000} s`, 0)),
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof ReplicationSendError) reject(err);
      // Nothing is sent to a peer whose certificate this server does not trust (spec: replication runs over HTTPS).
      else if (err.code !== undefined && UNTRUSTED_CERTIFICATE_CODES.has(err.code)) {
        reject(
          new ReplicationSendError(
            'PEER_UNREACHABLE',
            `refused the peer's certificate (${err.code}: ${err.message}); nothing was sent. Give this server the peer's CA (NODE_EXTRA_CA_CERTS) or fix the peer's certificate`,
            0,
          ),
        );
      } else
        reject(new ReplicationSendError('PEER_UNREACHABLE', `cannot reach the peer (${err.code ?? err.message})`, 0));
    });
    req.end(body);
  });
}
