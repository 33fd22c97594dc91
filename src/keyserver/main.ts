/**
 * Entry of `stash_key_server`. Only the option parser is loaded statically, so
 * `--help` and usage errors never load Koa, sodium or the store; `run` loads
 * the server lazily. Errors are caught here only and printed as
 * `stash_key_server: <message>` with an exit status by code.
 */
import { errorCode, errorMessage } from '../errors.js';
import { guardOutputStreams } from '../output-streams.js';
import { commandHelpText, helpText } from './cli/help.js';
import { parseCommandLine } from './cli/parse.js';
import { streamLogger } from './logger.js';

const exitByCode: Record<string, number> = {
  USAGE: 64,
  CONFIG: 78,
  NOT_IMPLEMENTED: 69,
  STATE_DIR_LOCKED: 75,
  EADDRINUSE: 69,
  EACCES: 77,
  PEER_UNREACHABLE: 69,
  REPLICATION_UNAUTHORIZED: 77,
  REPLICATION_FORBIDDEN: 77,
  STATE_UNREADABLE: 66,
  NOT_ROOT: 77,
  UNSUPPORTED_PLATFORM: 69,
  // No certificate over ACME at start: the unit does not restart on it (RestartPreventExitStatus), sparing the CA's failure limits.
  ACME_FAILED: 76,
  INSTALL_CONFLICT: 73,
  ADDON_CACHE: 73,
};

/** Runs the server command line (argv without node and script). */
export async function main(argv: string[]): Promise<void> {
  // Before anything writes: a closed or full stdout/stderr never crashes (output-streams.ts).
  guardOutputStreams('stash_key_server');
  try {
    if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
      const { readVersion } = await import('../version.js');
      process.stdout.write(`stash_key_server ${readVersion()}\n`);
      return;
    }
    if (argv.length === 1 && argv[0] === '__fetch-process') {
      // Not a command: the store's process of `run --processes N` starts its fetch processes so (multi/store-side.ts).
      const { runFetchProcess } = await import('./multi/fetch-process.js');
      await runFetchProcess();
      return;
    }
    const inv = parseCommandLine(argv);
    if (inv.command === 'help') {
      process.stdout.write(inv.topic === undefined ? helpText() : commandHelpText(inv.topic));
      process.exitCode = 0;
      return;
    }
    if (inv.warnings.length > 0) {
      const logger = streamLogger();
      for (const w of inv.warnings) logger.warn(w);
    }
    if (inv.command === 'run') {
      const { runForeground } = await import('./run.js');
      // SIGHUP parses the same command line again: config files are read anew, flags still win.
      await runForeground(inv.config, () => {
        const again = parseCommandLine(argv);
        if (again.command !== 'run') throw new Error('the command line no longer parses as run');
        return again.config;
      });
      return;
    }
    if (inv.command.startsWith('bench-')) {
      const { runBench } = await import('./bench/index.js');
      await runBench(inv.command, inv.config);
      return;
    }
    if (
      inv.command === 'resync-peer' ||
      inv.command === 'install' ||
      inv.command === 'uninstall' ||
      inv.command === 'status'
    ) {
      const { runOpsCommand } = await import('./ops-commands.js');
      process.exitCode = await runOpsCommand(inv.command, inv.config, inv.configFiles);
      return;
    }
    process.stderr.write(`stash_key_server: \`${inv.command}\` is not implemented yet in this release\n`);
    process.exitCode = exitByCode.NOT_IMPLEMENTED!;
  } catch (err) {
    process.stderr.write(`stash_key_server: ${errorMessage(err)}\n`);
    if (process.env.STASH_DEBUG === '1' && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
    const code = errorCode(err);
    process.exitCode = (code !== undefined && exitByCode[code]) || 1;
  }
}
