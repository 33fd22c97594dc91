/**
 * `stash_key_server run`: the server in the foreground until SIGINT/SIGTERM.
 * Developer mode puts the state in a fresh temporary folder, removed at exit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keepRunningWhenOutputFails } from '../output-streams.js';
import type { ServerConfig } from './cli/options.js';
import { streamLogger } from './logger.js';
import { startServer } from './server.js';
import { collectGarbageNow } from './settle-memory.js';

/** Runs until a termination signal; sets process.exitCode. */
export async function runForeground(input: ServerConfig): Promise<void> {
  const logger = streamLogger();
  // A server outlives its readers: `run --developer | tee`, then Ctrl-C on tee,
  // must still shut down cleanly and remove the developer state folder.
  keepRunningWhenOutputFails((reason) => logger.warn(`${reason}: verification links and notices printed there are lost`));
  const config = { ...input };
  let devDir: string | undefined;
  if (config.developer) {
    devDir = mkdtempSync(join(tmpdir(), 'stash-key-server-dev-'));
    config.stateDir = devDir;
    logger.info(`developer mode: state in ${devDir} (removed at exit)`);
  }
  try {
    const running = await startServer({ config, logger });
    collectGarbageNow();
    process.stdout.write(`stash_key_server: listening on ${running.url} (public URL ${running.config.publicUrl}, state ${config.stateDir})\n`);
    const signal = await new Promise<NodeJS.Signals>((done) => {
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
    });
    logger.info(`${signal}: shutting down`);
    await running.close();
    process.exitCode = 0;
  } finally {
    if (devDir) rmSync(devDir, { recursive: true, force: true });
  }
}
