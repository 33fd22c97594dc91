/**
 * Value parsers of the server's options. Each takes the raw text and `where`
 * (e.g. "--server-id" or "/etc/stash/key-server.toml:3: server_id") and throws a
 * UsageError that names the option and shows the rejected value.
 */
import { isIP } from 'node:net';
import { UsageError } from '../../errors.js';
import { keyServerBase } from '../../config/server-url.js';
import type { BindAddress, Route, TopologyServer, TopologyStatus } from '../server-config.js';

/** Largest server id a locator character can name (ring of 32). */
export const MAX_RING_ID = 31;
/** Largest `--server-id` the spec allows. */
export const MAX_SERVER_ID = 9;

export const topologyStatuses: readonly TopologyStatus[] = ['active', 'standby', 'promoted', 'disabled'];

function show(raw: string): string {
  return JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}...` : raw);
}

/** A whole number in [min, max] written in decimal digits only. */
export function parseInteger(raw: string, where: string, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
  const text = raw.trim();
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`${where} must be a whole number, got ${show(raw)}`);
  }
  const n = Number(text);
  if (n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `${min}..${max}`;
    throw new UsageError(`${where} must be ${range}, got ${n}`);
  }
  return n;
}

/** `true`/`false` (config files only; flags are present or absent). */
export function parseBoolean(raw: string, where: string): boolean {
  const text = raw.trim().toLowerCase();
  if (text === 'true' || text === 'yes' || text === '1') return true;
  if (text === 'false' || text === 'no' || text === '0') return false;
  throw new UsageError(`${where} must be true or false, got ${show(raw)}`);
}

/** A non-empty string without control characters. */
export function parseText(raw: string, where: string, maxLength = 4096): string {
  if (raw.length === 0) throw new UsageError(`${where} must not be empty`);
  if (raw.length > maxLength) throw new UsageError(`${where} is longer than ${maxLength} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) throw new UsageError(`${where} must not contain control characters`);
  return raw;
}

/**
 * An absolute http(s) URL without credentials, query or fragment, returned
 * without a trailing slash so that paths can be appended.
 */
export function parseHttpUrl(raw: string, where: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new UsageError(`${where} must be an absolute http:// or https:// URL, got ${show(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`${where} must use http:// or https://, got ${show(raw)}`);
  }
  if (url.hostname === '') throw new UsageError(`${where} has no host: ${show(raw)}`);
  if (url.username !== '' || url.password !== '')
    throw new UsageError(`${where} must not contain a user name or password`);
  if (url.search !== '' || url.hash !== '')
    throw new UsageError(`${where} must not contain a query or fragment: ${show(raw)}`);
  return url.href.replace(/\/+$/, '');
}

/**
 * A server's public URL (`--public-url`, a `--topology-server` entry): an
 * http(s) URL as parseHttpUrl takes it, written as the base or as its
 * /v1/share endpoint, returned as the base (keyServerBase) so that it is
 * advertised and used one way.
 */
export function parsePublicUrl(raw: string, where: string): string {
  return keyServerBase(parseHttpUrl(raw, where));
}

/** `HOST:PORT`, `[IPv6]:PORT`; port 0 asks the OS for a free port. */
export function parseBind(raw: string, where: string): BindAddress {
  const text = raw.trim();
  const m = /^\[([0-9A-Fa-f:.]+)\]:([0-9]+)$/.exec(text) ?? /^([A-Za-z0-9.-]+):([0-9]+)$/.exec(text);
  if (!m) throw new UsageError(`${where} must be HOST:PORT or [IPv6]:PORT, got ${show(raw)}`);
  const host = m[1]!;
  if (text.startsWith('[') && isIP(host) !== 6)
    throw new UsageError(`${where} has an invalid IPv6 address: ${show(raw)}`);
  if (/^[0-9.]+$/.test(host) && isIP(host) !== 4)
    throw new UsageError(`${where} has an invalid IPv4 address: ${show(raw)}`);
  const port = parseInteger(m[2]!, `${where} port`, 0, 65535);
  return { host, port };
}

function parseId(raw: string, where: string, what: string): number {
  return parseInteger(raw, `${where} ${what}`, 0, MAX_SERVER_ID);
}

/** `ID=URL[,STATUS]`; the URL as parsePublicUrl takes it. */
export function parseTopologyServer(raw: string, where: string): TopologyServer {
  const eq = raw.indexOf('=');
  if (eq <= 0) throw new UsageError(`${where} must be ID=URL[,STATUS], got ${show(raw)}`);
  const id = parseId(raw.slice(0, eq), where, 'server id');
  let rest = raw.slice(eq + 1);
  let status: TopologyStatus = 'active';
  const comma = rest.lastIndexOf(',');
  if (comma >= 0) {
    const word = rest.slice(comma + 1).trim();
    if (!(topologyStatuses as readonly string[]).includes(word)) {
      throw new UsageError(`${where} status must be one of ${topologyStatuses.join(', ')}, got ${show(word)}`);
    }
    status = word as TopologyStatus;
    rest = rest.slice(0, comma);
  }
  if (rest.trim() === '') throw new UsageError(`${where} has no URL (form ID=URL[,STATUS]): ${show(raw)}`);
  return { id, url: parsePublicUrl(rest, `${where} URL`), status };
}

/** `OWNER=PRIMARY[,FAILOVER...]`; the primary is required, ids may not repeat. */
export function parseRoute(raw: string, where: string): Route {
  const eq = raw.indexOf('=');
  if (eq <= 0) throw new UsageError(`${where} must be OWNER=PRIMARY[,FAILOVER...], got ${show(raw)}`);
  const owner = parseId(raw.slice(0, eq), where, 'owner id');
  const targets = raw.slice(eq + 1).split(',');
  if (targets[0] === undefined || targets[0].trim() === '') {
    throw new UsageError(`${where} has no primary server id (form OWNER=PRIMARY[,FAILOVER...]): ${show(raw)}`);
  }
  const ids = targets.map((t, i) => {
    if (t.trim() === '') throw new UsageError(`${where} has an empty failover id: ${show(raw)}`);
    return parseId(t, where, i === 0 ? 'primary id' : 'failover id');
  });
  if (new Set(ids).size !== ids.length) throw new UsageError(`${where} names a server twice: ${show(raw)}`);
  return { owner, primary: ids[0]!, failovers: ids.slice(1) };
}

/** Cluster ids appear in topology payloads and replication signatures: keep them plain. */
export function parseClusterId(raw: string, where: string): string {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw.trim())) {
    throw new UsageError(`${where} must be 1-64 characters of A-Z a-z 0-9 . _ -, got ${show(raw)}`);
  }
  return raw.trim();
}

/** The replication secret: long enough that an HMAC key is not guessable. */
export function parseReplicationToken(raw: string, where: string): string {
  const text = parseText(raw.trim(), where, 1024);
  if (text.length < 16) throw new UsageError(`${where} must be at least 16 characters long`);
  return text;
}
