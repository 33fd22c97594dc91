/**
 * Reads a request body with a size limit and a deadline. A declared
 * Content-Length over the limit is refused before reading; a body that grows
 * past it or trickles in too slowly is cut off and the connection closed, so
 * a slow or oversized sender holds nothing for long.
 */
import type { IncomingMessage } from 'node:http';
import { KeyServerError } from '../errors.js';

export async function readBody(req: IncomingMessage, limit: number, timeoutMs: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    throw new KeyServerError('PAYLOAD_TOO_LARGE', `the request body is larger than ${limit} bytes`);
  }
  return new Promise<Buffer>((resolve, reject) =>
    readBodyThen(req, limit, timeoutMs, (err, body) => (err ? reject(err) : resolve(body!))),
  );
}

/** The reading itself: `done` runs once, with the body or a KeyServerError. */
function readBodyThen(
  req: IncomingMessage,
  limit: number,
  timeoutMs: number,
  done: (err: Error | undefined, body?: Buffer) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  const finish = (err: Error | undefined, body?: Buffer) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
    req.off('aborted', onAborted);
    if (err) req.pause();
    done(err, body);
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) finish(new KeyServerError('PAYLOAD_TOO_LARGE', `the request body is larger than ${limit} bytes`));
    else chunks.push(chunk);
  };
  // One chunk (the usual tiny body) is ours already: no copy.
  const onEnd = () => finish(undefined, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  const onError = (err: Error) =>
    finish(new KeyServerError('MALFORMED_REQUEST', 'the request body could not be read', { cause: err }));
  const onAborted = () => finish(new KeyServerError('MALFORMED_REQUEST', 'the client aborted the request'));
  const timer = setTimeout(
    () =>
      finish(
        new KeyServerError(
          'REQUEST_TIMEOUT',
          `the request body did not arrive within ${Math.round(timeoutMs / 1000)} seconds`,
        ),
      ),
    timeoutMs,
  );
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
  req.on('aborted', onAborted);
}
