/**
 * The operator commands besides `run`: resync-peer, install, uninstall and
 * status. Loaded lazily by main.ts; each prints what it did on stdout and
 * returns the exit status (errors are thrown to main.ts).
 */
import type { ServerConfig } from './server-config.js';
import { systemClock } from './clock.js';
import { streamLogger } from './logger.js';

export async function runOpsCommand(
  command: 'resync-peer' | 'install' | 'uninstall' | 'status',
  config: ServerConfig,
  configFiles: string[],
): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  if (command === 'resync-peer') {
    const { resyncPeer } = await import('./replication/resync.js');
    const r = await resyncPeer(config, { clock: systemClock, logger: streamLogger() });
    out(
      `resync-peer: sent ${r.shares} share(s) (${r.pending} pending verification) and ${r.tombstones} tombstone(s) ` +
        `from ${config.stateDir} to ${config.peerUrl} (server ${r.peerServerId ?? '?'}) in ${r.batches} batch(es): ` +
        `${r.applied} applied, ${r.unchanged} already there`,
    );
    return 0;
  }
  const { install, uninstall, serviceStatus } = await import('./install/install.js');
  if (command === 'install') return install(config, out);
  if (command === 'uninstall') return uninstall(config, out);
  void configFiles;
  return serviceStatus(out);
}
