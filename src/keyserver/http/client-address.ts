/**
 * The client address a request is counted against. From the socket, or with
 * --trust-proxy from the LAST X-Forwarded-For entry: that is the one our own
 * proxy appended; entries to its left were sent by the client and can be
 * forged. IPv6 clients are counted per /64, the block one subscriber gets.
 */
import { isIP } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';

export interface ClientAddress {
  /** The address as seen (for logs). */
  ip: string;
  /** The rate-limit key: the IPv4 address, or the IPv6 /64 prefix. */
  key: string;
}

function expandV6(ip: string): string[] | undefined {
  const [head, tail] = ip.split('::') as [string, string | undefined];
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  if (tail === undefined && h.length !== 8) return undefined;
  const fill = 8 - h.length - t.length;
  if (fill < 0) return undefined;
  return [...h, ...Array<string>(tail === undefined ? 0 : fill).fill('0'), ...t];
}

/** Normalises an address and computes its limit key; undefined if not an IP. */
export function addressKey(raw: string | undefined): ClientAddress | undefined {
  if (raw === undefined) return undefined;
  let ip = raw.trim();
  const zone = ip.indexOf('%');
  if (zone >= 0) ip = ip.slice(0, zone);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) ip = mapped[1]!;
  const family = isIP(ip);
  if (family === 4) return { ip, key: ip };
  if (family !== 6) return undefined;
  const groups = ip.includes('.') ? undefined : expandV6(ip.toLowerCase());
  const key = groups
    ? `${groups
        .slice(0, 4)
        .map((g) => Number.parseInt(g, 16).toString(16))
        .join(':')}::/64`
    : ip.toLowerCase();
  return { ip, key };
}

export function clientAddress(
  req: { headers: IncomingHttpHeaders; socket: { remoteAddress?: string | undefined } },
  trustProxy: boolean,
): ClientAddress {
  if (trustProxy) {
    const header = req.headers['x-forwarded-for'];
    const value = Array.isArray(header) ? header.join(',') : header;
    if (value) {
      const last = value.split(',').pop();
      const parsed = addressKey(last);
      if (parsed) return parsed;
    }
  }
  return addressKey(req.socket.remoteAddress) ?? { ip: 'unknown', key: 'unknown' };
}
