/**
 * The server under test of the HTTP benchmarks: a real server (server.ts) on
 * 127.0.0.1:0 in this process, in a temporary state folder unless
 * --state-dir is given, every rate limit off, no replication, plain HTTP, info lines dropped
 * (warnings and errors still reach stderr), and a mailer that keeps each
 * verification link in memory for the load generator (flow) instead of
 * running a mail command.
 */
import { randomBytes, createHash } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../../errors.js';
import type { ServerConfig } from '../server-config.js';
import { streamLogger, type Logger } from '../logger.js';
import type { Mailer } from '../mailer.js';
import type { LinkFeed } from './load-driver.js';
import { startServer, type RunningServer } from '../server.js';
import { ringSuccessor } from '../owner-routing.js';
import { generateShareCode } from '../share-code.js';
import type { ShareStore } from '../store/share-store.js';
import { LOG_NAME } from '../store/state-dir.js';

export interface BenchServer {
  url: string;
  running: RunningServer;
  /** Where the verification links go once mailed (flow): [email, path] pairs, a batch per turn of the event loop. */
  feedLinks: LinkFeed;
  /** Stops the server; returns the store's size on disk. Removes a temporary state folder. */
  close(): Promise<{ storeBytes: number }>;
}

/** Drops info lines: a benchmark would otherwise print one per publish. */
export function quietLogger(): Logger {
  const loud = streamLogger();
  return { info: () => {}, warn: loud.warn, error: loud.error };
}

/**
 * The state folder of a benchmark: --state-dir when given (kept), else a
 * temporary one (removed). A given folder must not hold a store yet: a
 * benchmark writes thousands of throwaway shares, and a --config file meant
 * for the real server would otherwise point it at the real store.
 */
export function benchStateDir(config: ServerConfig, explicit: boolean): { path: string; remove(): void } {
  if (explicit) {
    if (storeBytesOnDisk(config.stateDir) > 0) {
      throw new UsageError(
        `--state-dir ${config.stateDir} already holds a store; benchmarks write throwaway shares, so give an empty or new folder`,
      );
    }
    return { path: config.stateDir, remove: () => {} };
  }
  const path = mkdtempSync(join(tmpdir(), 'stash-key-server-bench-'));
  const remove = () => rmSync(path, { recursive: true, force: true });
  // Also when the run is interrupted (index.ts turns SIGINT/SIGTERM into an exit).
  process.once('exit', remove);
  return { path, remove };
}

export function storeBytesOnDisk(dir: string): number {
  try {
    return statSync(join(dir, LOG_NAME)).size;
  } catch {
    return 0;
  }
}

/** Starts the server under test. `keepLinks` passes the mailed links on (feedLinks) for the flow benchmark. */
export async function startBenchServer(
  config: ServerConfig,
  stateDirGiven: boolean,
  keepLinks: boolean,
): Promise<BenchServer> {
  const state = benchStateDir(config, stateDirGiven);
  let batch: Array<[string, string]> = [];
  let deliver: ((links: Array<[string, string]>) => void) | undefined;
  /** Hands the batch on; kept until someone takes links (feedLinks). */
  const flush = (): void => {
    if (deliver === undefined || batch.length === 0) return;
    const links = batch;
    batch = [];
    deliver(links);
  };
  const mailer: Mailer = {
    async send(email, _url, token, kind = 'verify') {
      // The path the app confirms at (routes: POST /verify/:token); other mails (manage links) are not the flow's.
      if (keepLinks && kind === 'verify' && batch.push([email, `/verify/${token}`]) === 1) setImmediate(flush);
      return { verification: 'sent', message: 'benchmark: the link was kept in memory' };
    },
  };
  const benchConfig: ServerConfig = {
    ...config,
    bind: { host: '127.0.0.1', port: 0 },
    stateDir: state.path,
    developer: false,
    publicUrl: undefined,
    tlsCert: undefined,
    tlsKey: undefined,
    trustProxy: false,
    rateLimitPerMinute: 0,
    verificationEmailRateLimitPerHour: 0,
    verificationEmailIpRateLimitPerHour: 0,
    verificationEmailCommand: undefined,
    // Throwaway shares must never reach a real peer.
    replicationPeerUrls: [],
    replicationToken: undefined,
    replicationTokenFile: undefined,
  };
  let running: RunningServer;
  try {
    running = await startServer({ config: benchConfig, logger: quietLogger(), mailer });
  } catch (err) {
    state.remove();
    throw err;
  }
  return {
    url: running.url,
    running,
    feedLinks(to) {
      deliver = to;
      flush();
    },
    async close() {
      await running.close();
      const storeBytes = storeBytesOnDisk(state.path);
      state.remove();
      return { storeBytes };
    },
  };
}

/**
 * Creates `count` verified shares directly in the store (durable writes,
 * batches of 512 share one fsync through group commit) and returns their
 * display codes.
 */
export async function preloadShares(
  store: ShareStore,
  config: ServerConfig,
  count: number,
  keys: Buffer[],
  now = Date.now(),
): Promise<string[]> {
  const codes: string[] = [];
  const secondary = ringSuccessor(config);
  for (let done = 0; done < count; ) {
    const batch = Math.min(512, count - done);
    await Promise.all(
      Array.from({ length: batch }, async (_, j) => {
        const i = done + j;
        let code = generateShareCode(config.serverId, secondary);
        while (store.has(code.canonical)) code = generateShareCode(config.serverId, secondary);
        const tokenHash = createHash('sha256').update(randomBytes(32)).digest();
        await store.put({
          code: code.canonical,
          publicKey: keys[i % keys.length]!,
          email: `preload-${i}@example.org`,
          createdAt: now,
          expiresAt: now + config.shareTtlSeconds * 1000,
          tokenHash,
        });
        await store.verify(tokenHash);
        codes.push(code.display);
      }),
    );
    done += batch;
  }
  return codes;
}
