/**
 * What a POST /v1/share body asks, as the front on the raw connection
 * (fetch-front.ts) reads it: the usual binary fetch without decoding the
 * whole body, anything else decoded as the Koa route decodes it.
 */
import { MalformedRequestError } from '../errors.js';
import { decodeJsonShareRequest } from '../wire/json.js';
import { MessageType, WIRE_VERSION, decodeShareRequest, type ShareRequest } from '../wire/messages.js';

const fail = (message: string) => new MalformedRequestError(message);

/**
 * The code of the usual binary fetch in buf[from..end) (version, type,
 * length, a code of visible ASCII, nothing after), else undefined: any
 * other body is decoded in full (requestOf).
 */
export function usualFetchCode(buf: Buffer, from: number, end: number): string | undefined {
  if (buf[from] !== WIRE_VERSION || buf[from + 1] !== MessageType.fetchRequest || from + 3 + buf[from + 2]! !== end)
    return undefined;
  for (let i = from + 3; i < end; i++) if (buf[i]! < 0x21 || buf[i]! > 0x7e) return undefined;
  return buf.toString('latin1', from + 3, end);
}

/** The request in a body, or undefined when the body is not a well-formed one (the app then says why). */
export function requestOf(body: Buffer, json: boolean): ShareRequest | undefined {
  try {
    return json ? decodeJsonShareRequest(body, fail) : decodeShareRequest(body, fail);
  } catch {
    return undefined;
  }
}
