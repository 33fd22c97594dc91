/**
 * `stash_key_server run`: the server in the foreground until SIGINT/SIGTERM.
 * Developer mode puts the state in a fresh temporary folder, removed at exit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keepRunningWhenOutputFails } from '../output-streams.js';
import type { ServerConfig } from './server-config.js';
import { diskBudget } from './disk/budget.js';
import { RotatingLogFile } from './disk/rotating-log.js';
import { streamLogger } from './logger.js';
import { errorMessage } from '../errors.js';
import { startServer, type RunningServer } from './server.js';
import { collectGarbageNow } from './settle-memory.js';

/**
 * What `--processes auto` (the installed unit's setting) serves from: one
 * process. A fetch process holds its own copy of the live shares and its own
 * node runtime, so two processes take 191-204 MB with 100,000 shares where
 * one takes under 100 MB (the spec's limit), and on 2 CPUs the second one
 * added no measurable fetches (1.01 x): docs/benchmarks.md, "Memory of the
 * installed service". `--processes 2` stays for a machine with memory to spare.
 */
export const AUTO_PROCESSES = 1;

/**
 * Runs until a termination signal; sets process.exitCode. SIGHUP reads the
 * configuration again through `reread` (the same command line and config
 * files) and applies it without a restart (reload.ts).
 */
export async function runForeground(input: ServerConfig, reread?: () => ServerConfig): Promise<void> {
  // --log-file: the server writes and rotates server.log itself, within its share of the disk cap.
  const budget = diskBudget(input.diskCapBytes);
  const logFile =
    input.logFile === undefined
      ? undefined
      : RotatingLogFile.open(input.logFile, budget.logFileBytes, budget.logFilesKept);
  const logger = streamLogger(logFile ?? process.stderr);
  // A server outlives its readers: `run --developer | tee`, then Ctrl-C on tee,
  // must still shut down cleanly and remove the developer state folder.
  keepRunningWhenOutputFails((reason) =>
    logger.warn(`${reason}: verification links and notices printed there are lost`),
  );
  const config = { ...input };
  let devDir: string | undefined;
  if (config.developer) {
    devDir = mkdtempSync(join(tmpdir(), 'stash-key-server-dev-'));
    config.stateDir = devDir;
    logger.info(`developer mode: state in ${devDir} (removed at exit)`);
  }
  // Taken before the store is opened: SIGHUP's default action would end the process
  // (systemctl reload during a long recovery). A reload asked for then runs once the server is up.
  let running: RunningServer | undefined;
  let hangup = false;
  let reloading: Promise<void> | undefined;
  const reload = async () => {
    while (hangup && running) {
      hangup = false;
      let next: ServerConfig;
      try {
        next = (reread ?? (() => input))();
      } catch (err) {
        running.reloadFailed(errorMessage(err));
        continue;
      }
      // Developer mode's state folder is the temporary one, not what the command line says.
      if (devDir) next = { ...next, stateDir: devDir };
      await running.reload(next).catch((err: unknown) => running!.reloadFailed(errorMessage(err)));
    }
  };
  const startReload = () => {
    reloading ??= reload().finally(() => {
      reloading = undefined;
    });
  };
  const onHangup = () => {
    logger.info(
      running
        ? 'SIGHUP: reading the configuration again'
        : 'SIGHUP: the configuration is read again once the server is up',
    );
    hangup = true;
    if (running) startReload();
  };
  process.on('SIGHUP', onHangup);
  try {
    const processes = config.processes === 'auto' ? AUTO_PROCESSES : config.processes;
    running = await startServer({ config, logger, processes, ...(logFile ? { logSink: logFile } : {}) });
    if (hangup) startReload();
    collectGarbageNow();
    // Taken before the line that says the server is up: whoever reads it may stop the server at once.
    const stopped = new Promise<NodeJS.Signals>((done) => {
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
    });
    process.stdout.write(
      `stash_key_server: listening on ${running.url} (public URL ${running.config.publicUrl}, state ${config.stateDir})\n`,
    );
    const signal = await stopped;
    logger.info(`${signal}: shutting down`);
    await reloading;
    await running.close();
    process.exitCode = 0;
  } finally {
    process.off('SIGHUP', onHangup);
    if (devDir) rmSync(devDir, { recursive: true, force: true });
    logFile?.close();
  }
}
