/**
 * `stash_key_server bench-store`: the store alone, no HTTP. Times N durable
 * writes (put_share records, each resolved after fdatasync; `concurrency`
 * writes in flight share a group commit), then N lookups of the written
 * codes. --payload-bytes pads the stored address so that a record approaches
 * N bytes (the key is always 65 bytes; an address is at most 254 characters);
 * the real record size is reported.
 */
import { createHash, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { ServerConfig } from '../server-config.js';
import { systemClock } from '../clock.js';
import { generateShareCode } from '../share-code.js';
import { encodeLogRecord } from '../store/log-format.js';
import { ShareStore } from '../store/share-store.js';
import { benchStateDir, preloadShares, quietLogger, storeBytesOnDisk } from './bench-server.js';
import { concurrencyOf, stateDirGiven } from './settings.js';
import { runLoad } from './load.js';
import { RssSampler, collectGarbage, latencyOf, peakRssBytes, progressLine, type BenchReport } from './report.js';
import { benchPublicKey } from './requests.js';

const DOMAIN = '@example.org';
const MAX_EMAIL = 254;

/** An address of `length` characters (at least the bare `b-<i>@example.org`). */
function paddedEmail(i: number, length: number): string {
  const base = `b-${i}`;
  const pad = Math.max(0, Math.min(MAX_EMAIL, length) - base.length - DOMAIN.length);
  return `${base}${'x'.repeat(pad)}${DOMAIN}`;
}

/** The address length that brings a record towards --payload-bytes, and the record size it gives. */
function recordSizes(config: ServerConfig, key: Buffer): { emailLength: number; recordBytes: number } {
  // Record size without the address, to pad the address towards --payload-bytes.
  const probeCode = generateShareCode(config.serverId, config.serverId);
  const probe = (email: string) =>
    encodeLogRecord({
      type: 'putShare',
      stamp: { origin: config.serverId, epoch: 0, seq: 1 },
      share: {
        code: probeCode.canonical,
        publicKey: key,
        email,
        createdAt: 0,
        expiresAt: 0,
        tokenHash: Buffer.alloc(32),
        verifiedAt: 0,
        fetchCount: 0,
        stamp: { origin: 0, epoch: 0, seq: 1 },
      },
    }).length;
  const emailLength = config.payloadBytes - probe('');
  const recordBytes = probe(paddedEmail(0, emailLength));
  return { emailLength, recordBytes };
}

/** Looks each of `codes` up once, in a scattered order; resolves with the number found and the seconds taken. */
function timeLookups(store: ShareStore, codes: string[]): { found: number; lookupSeconds: number } {
  // Lookups are sub-microsecond Map reads: timed as a whole, not one by one.
  let found = 0;
  const t0 = performance.now();
  for (let i = 0; i < codes.length; i++)
    if (store.lookup(codes[(i * 7919) % codes.length]!).state !== 'missing') found++;
  return { found, lookupSeconds: (performance.now() - t0) / 1000 };
}

/** Writes one share under a fresh code (durable when it resolves); resolves with the code. */
async function putShare(
  store: ShareStore,
  config: ServerConfig,
  key: Buffer,
  email: string,
  now: number,
): Promise<string> {
  let code = generateShareCode(config.serverId, config.serverId);
  while (store.has(code.canonical)) code = generateShareCode(config.serverId, config.serverId);
  const tokenHash = createHash('sha256').update(randomBytes(32)).digest();
  await store.put({
    code: code.canonical,
    publicKey: key,
    email,
    createdAt: now,
    expiresAt: now + config.shareTtlSeconds * 1000,
    tokenHash,
  });
  return code.canonical;
}

export async function benchStore(config: ServerConfig): Promise<BenchReport> {
  const concurrency = concurrencyOf(config);
  const state = benchStateDir(config, stateDirGiven(config));
  const store = await ShareStore.open({
    dir: state.path,
    serverId: config.serverId,
    originEpoch: config.originEpoch ?? Date.now(),
    compactMinBytes: config.compactMinBytes,
    diskCapBytes: config.diskCapBytes,
    clock: systemClock,
    logger: quietLogger(),
    sweepIntervalMs: 0,
  });
  try {
    const key = benchPublicKey();
    if (config.preloadShares > 0) await preloadShares(store, config, config.preloadShares, [key]);
    const { emailLength, recordBytes } = recordSizes(config, key);

    const codes: string[] = new Array(config.requests);
    const now = Date.now();
    const progress = progressLine('bench-store', config.requests);
    const rss = new RssSampler();
    collectGarbage();
    rss.start();
    const writes = await runLoad({
      total: config.requests,
      concurrency,
      async run(i) {
        codes[i] = await putShare(store, config, key, paddedEmail(i, emailLength), now);
        return true;
      },
      ...(progress ? { onProgress: (d: number) => progress.update(d) } : {}),
    });
    progress?.end();
    const underLoadRss = rss.stop();

    const written = codes.filter((c) => c !== undefined);
    const { found, lookupSeconds } = timeLookups(store, written);
    const stats = store.stats();
    await store.close();
    return {
      command: 'bench-store',
      requests: writes.requests,
      errors: writes.errors + (written.length - found),
      seconds: writes.seconds,
      requests_per_second: writes.requests / writes.seconds,
      latency_ms: latencyOf(writes.histogram),
      server_peak_rss_bytes: underLoadRss,
      process_peak_rss_bytes: peakRssBytes(),
      store_bytes: storeBytesOnDisk(state.path),
      live_shares: stats.sharesLive,
      concurrency,
      encoding: 'store',
      request_bytes: recordBytes,
      response_bytes: 0,
      preload_shares: config.preloadShares,
      extra: {
        lookups: written.length,
        lookups_per_second: Math.round(written.length / Math.max(lookupSeconds, 1e-9)),
        compactions: stats.compactions,
      },
      ...(writes.firstError !== undefined ? { first_error: writes.firstError } : {}),
    };
  } catch (err) {
    await store.close();
    throw err;
  } finally {
    state.remove();
  }
}
