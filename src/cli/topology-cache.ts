/**
 * The client's memory of key server topologies, so that `contact receive`
 * can fail over when the one server it is configured with is the one that
 * died: every topology a server answers (doctor, publish, receive) is kept
 * per cluster in the user's cache folder, with the URLs that led to it.
 *
 * - `$XDG_CACHE_HOME/stash/` (absolute only) or `~/.cache/stash/` on Linux,
 *   `~/Library/Caches/stash/` on macOS, `%LOCALAPPDATA%\stash\cache\` on
 *   Windows; one file per cluster, `topology-<cluster>.json`.
 * - A newer topology_version replaces an older one, never the reverse (a
 *   server restarted with an old configuration cannot roll the cache back).
 * - It holds only what GET /v1/topology tells anyone: no secret. Still
 *   written owner-only (0700 folder, 0600 file), atomically.
 * - Server URLs are kept and compared as their base (keyServerBase): a
 *   server written as `https://host` or `https://host/v1/share`, in the
 *   configuration, a topology or an older file, is the same server.
 * - A file that is damaged, or names a server URL that breaks the URL rule,
 *   is ignored as if absent; every failure to read or write the cache is
 *   silent: the cache can only add a fallback, never fail a command.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from './cache-dir.js';
import { keyServerBase, keyServerUrlProblem } from '../config/server-url.js';
import type { TopologyResponse, TopologyStatus } from '../keyserver/wire/messages.js';

export { cacheDir };

const FORMAT = 1;
/** Clusters remembered at most (files read when looking one up). */
const MAX_FILES = 64;
/** URLs remembered per cluster as the ones that led to it. */
const MAX_ASKED = 16;
const STATUSES: readonly TopologyStatus[] = ['active', 'standby', 'promoted', 'disabled'];

interface CacheFile {
  format: number;
  clusterId: string;
  topologyVersion: number;
  savedAt: string;
  /** The server that answered with this topology. */
  learnedFrom: string;
  /** Configured URLs that led to this cluster (a dead server is looked up by them). */
  askedAt: string[];
  topology: TopologyResponse;
}

/** A topology from the cache, and where and when it was learned. */
export interface CachedTopology {
  topology: TopologyResponse;
  learnedFrom: string;
  savedAt: string;
}

/** The file of a cluster: its id when that is a plain file name, else a hash of it. */
function fileOf(dir: string, clusterId: string): string {
  const plain = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/.test(clusterId);
  const name = plain ? clusterId : `h${createHash('sha256').update(clusterId).digest('hex').slice(0, 32)}`;
  return join(dir, `topology-${name}.json`);
}

const isId = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 9;
/** URLs are kept and compared as their base: a server written with or without /v1/share is one server. */
const base = keyServerBase;

/** The file's content when every field is what this module writes, else null (damaged: ignored). */
function parse(text: string): CacheFile | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  const d = doc as Partial<CacheFile> | null;
  if (!d || d.format !== FORMAT || typeof d.clusterId !== 'string' || !Number.isSafeInteger(d.topologyVersion))
    return null;
  if (typeof d.learnedFrom !== 'string' || typeof d.savedAt !== 'string' || !Array.isArray(d.askedAt)) return null;
  if (!d.askedAt.every((u) => typeof u === 'string' && keyServerUrlProblem(u) === null)) return null;
  const t = d.topology as Partial<TopologyResponse> | undefined;
  if (!t || t.clusterId !== d.clusterId || t.topologyVersion !== d.topologyVersion || !isId(t.serverId)) return null;
  if (!Array.isArray(t.servers) || !Array.isArray(t.routes) || !Array.isArray(t.promotedOwners)) return null;
  const serversOk = t.servers.every(
    (s) =>
      isId(s?.id) && typeof s.url === 'string' && keyServerUrlProblem(s.url) === null && STATUSES.includes(s.status),
  );
  const routesOk = t.routes.every(
    (r) => isId(r?.owner) && isId(r.primary) && Array.isArray(r.failovers) && r.failovers.every(isId),
  );
  if (!serversOk || !routesOk || !t.promotedOwners.every(isId)) return null;
  return d as CacheFile;
}

function readAll(dir: string): CacheFile[] {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => n.startsWith('topology-') && n.endsWith('.json'))
      .sort()
      .slice(0, MAX_FILES);
  } catch {
    return [];
  }
  const out: CacheFile[] = [];
  for (const name of names) {
    try {
      const file = parse(readFileSync(join(dir, name), 'utf8'));
      if (file) out.push(file);
    } catch {
      /* unreadable: as if absent */
    }
  }
  return out;
}

/**
 * The cached topology for a configured server: the cluster it was configured
 * for before, or whose topology lists it; the most recently saved one when
 * several match. Null when nothing usable is cached.
 */
export function cachedTopologyFor(
  configured: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): CachedTopology | null {
  const wanted = new Set(configured.map(base));
  const matches = readAll(cacheDir(env)).filter(
    (f) => f.askedAt.some((u) => wanted.has(base(u))) || f.topology.servers.some((s) => wanted.has(base(s.url))),
  );
  if (matches.length === 0) return null;
  const best = matches.reduce((a, b) => (Date.parse(b.savedAt) > Date.parse(a.savedAt) ? b : a));
  return { topology: best.topology, learnedFrom: best.learnedFrom, savedAt: best.savedAt };
}

/**
 * Keeps `topology`, which `learnedFrom` answered, as the one of its cluster,
 * unless the cache already holds a newer version; `askedAt` are the
 * configured URLs that led to it. Never throws.
 */
export function saveTopology(
  topology: TopologyResponse,
  learnedFrom: string,
  askedAt: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): void {
  try {
    if (keyServerUrlProblem(learnedFrom) !== null) return;
    // Entries a client would pass over anyway are left out, so the file always parses.
    const servers = topology.servers
      .filter((s) => keyServerUrlProblem(s.url) === null)
      .map((s) => ({ ...s, url: base(s.url) }));
    const dir = cacheDir(env);
    const path = fileOf(dir, topology.clusterId);
    let old: CacheFile | null = null;
    try {
      old = parse(readFileSync(path, 'utf8'));
    } catch {
      /* none yet */
    }
    if (old && old.clusterId === topology.clusterId && old.topologyVersion > topology.topologyVersion) return;
    const asked = [...new Set([...askedAt, ...(old?.clusterId === topology.clusterId ? old.askedAt : [])].map(base))]
      .filter((u) => keyServerUrlProblem(u) === null)
      .slice(0, MAX_ASKED);
    const file: CacheFile = {
      format: FORMAT,
      clusterId: topology.clusterId,
      topologyVersion: topology.topologyVersion,
      savedAt: new Date().toISOString(),
      learnedFrom: base(learnedFrom),
      askedAt: asked,
      topology: { ...topology, servers },
    };
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    renameSync(tmp, path);
  } catch {
    /* a cache that cannot be written only loses a fallback */
  }
}
