/**
 * Where `install` puts things. The spec names the unit and the config two
 * ways (stash-share-server.service and /etc/stash/share-server.toml in its
 * path list; stash-key-server.service and /etc/stash/key-server.toml in the
 * commands); we use the key-server names everywhere, as the status command
 * and the installed unit do.
 *
 * STASH_KEY_SERVER_ROOT_PREFIX (tests) puts every file under another root and
 * skips systemctl; the contents of the files still name the real paths.
 */
import { join } from 'node:path';

export const UNIT_NAME = 'stash-key-server.service';

export interface InstallPaths {
  /** '' for the real root. */
  prefix: string;
  unit: string;
  configDir: string;
  config: string;
  /** The replication token, root-only; systemd hands it to the service (LoadCredential=). */
  token: string;
  state: string;
  /** Where systemd keeps the state of a DynamicUser service (/var/lib/stash-key-server links there). */
  statePrivate: string;
  cache: string;
  cachePrivate: string;
  logDir: string;
  log: string;
  /** Where `install` run from the single executable puts a copy of it (the unit runs that copy). */
  executable: string;
}

/** The real paths (as written into the unit and the config). */
export const realPaths = {
  unit: `/etc/systemd/system/${UNIT_NAME}`,
  configDir: '/etc/stash',
  config: '/etc/stash/key-server.toml',
  token: '/etc/stash/replication-token',
  state: '/var/lib/stash-key-server',
  statePrivate: '/var/lib/private/stash-key-server',
  cache: '/var/cache/stash-key-server',
  cachePrivate: '/var/cache/private/stash-key-server',
  logDir: '/var/log/stash-key-server',
  log: '/var/log/stash-key-server/server.log',
  executable: '/usr/local/bin/stash_key_server',
} as const;

/** The paths on this machine, under `prefix` (STASH_KEY_SERVER_ROOT_PREFIX) when given. */
export function installPaths(prefix: string = process.env.STASH_KEY_SERVER_ROOT_PREFIX ?? ''): InstallPaths {
  const p = (path: string) => (prefix === '' ? path : join(prefix, path));
  return {
    prefix,
    unit: p(realPaths.unit),
    configDir: p(realPaths.configDir),
    config: p(realPaths.config),
    token: p(realPaths.token),
    state: p(realPaths.state),
    statePrivate: p(realPaths.statePrivate),
    cache: p(realPaths.cache),
    cachePrivate: p(realPaths.cachePrivate),
    logDir: p(realPaths.logDir),
    log: p(realPaths.log),
    executable: p(realPaths.executable),
  };
}
