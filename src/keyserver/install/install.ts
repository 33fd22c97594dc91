/**
 * `install`, `uninstall` and `status`: the server as a boot-started systemd
 * service. Linux only, and install/uninstall as root only (clear errors
 * otherwise). When systemd is not running (a container, a chroot) the files
 * are still written and the command says so; under
 * STASH_KEY_SERVER_ROOT_PREFIX systemctl is never called.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StashError } from '../../errors.js';
import type { ServerConfig } from '../server-config.js';
import { parseCommandLine } from '../cli/parse.js';
import { alive } from '../../process-state.js';
import { isSingleExecutable } from '../sea/runtime.js';
import { installExecutable, removeExecutable } from './executable.js';
import { liveServerLines } from './live-status.js';
import { UNIT_NAME, installPaths, realPaths, type InstallPaths } from './paths.js';
import { defaultConfigText, unitText } from './unit.js';
import { describeSource, installSource } from './certificate-source.js';

export interface HostFacts {
  platform: NodeJS.Platform;
  /** undefined where there are no uids (Windows). */
  uid: number | undefined;
  /** Whether systemd is the running init (sd_booted: /run/systemd/system exists). */
  systemdRunning: boolean;
  /** Runs systemctl; returns its exit status and output. */
  systemctl(args: string[]): { status: number; output: string };
}

export function realHost(paths: InstallPaths): HostFacts {
  return {
    platform: process.platform,
    uid: typeof process.getuid === 'function' ? process.getuid() : undefined,
    // Under a root prefix the host's systemd is never touched.
    systemdRunning: paths.prefix === '' && existsSync('/run/systemd/system'),
    systemctl(args) {
      const r = spawnSync('systemctl', args, { encoding: 'utf8', timeout: 60_000 });
      return { status: r.status ?? 1, output: `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() || (r.error?.message ?? '') };
    },
  };
}

type Out = (line: string) => void;

function requireLinux(host: HostFacts, command: string): void {
  if (host.platform !== 'linux') {
    throw new StashError(
      'UNSUPPORTED_PLATFORM',
      `\`${command}\` installs a systemd service and runs on Linux only (this is ${host.platform}); run \`stash_key_server run --config FILE\` under your own service manager instead`,
    );
  }
}

function requireRoot(host: HostFacts, command: string): void {
  if (host.uid !== 0)
    throw new StashError(
      'NOT_ROOT',
      `\`${command}\` must run as root (it writes under /etc and /var); try: sudo stash_key_server ${command}`,
    );
}

/** bin/stash_key_server.js of this package (from src/ or dist/ alike). */
function serverScript(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bin', 'stash_key_server.js');
}

function systemctlStep(host: HostFacts, out: Out, args: string[]): void {
  const r = host.systemctl(args);
  if (r.status !== 0)
    throw new StashError(
      'SYSTEMCTL_FAILED',
      `systemctl ${args.join(' ')} failed (exit ${r.status}): ${r.output.slice(0, 500)}`,
    );
  out(`ran: systemctl ${args.join(' ')}`);
}

/** `install [--force-config]`. */
export async function install(
  config: ServerConfig,
  out: Out,
  host?: HostFacts,
  paths: InstallPaths = installPaths(),
): Promise<number> {
  const h = host ?? realHost(paths);
  requireLinux(h, 'install');
  requireRoot(h, 'install');
  // The certificate for port 443, from the flags or the kept config: asked for before anything is written.
  const existing = existsSync(paths.config)
    ? { path: paths.config, text: await readFile(paths.config, 'utf8') }
    : undefined;
  const source = await installSource(config, existing);
  // From the single executable: a copy of it in /usr/local/bin, which the unit runs; from npm: node and the package's script.
  const single = isSingleExecutable();
  if (single) await installExecutable(paths, out);
  await mkdir(dirname(paths.unit), { recursive: true, mode: 0o755 });
  const tlsFiles = source.kind === 'files' ? { cert: source.cert, key: source.key } : undefined;
  await writeFile(
    paths.unit,
    unitText(
      single ? { executable: realPaths.executable } : { node: process.execPath, script: serverScript() },
      tlsFiles,
    ),
    { mode: 0o644 },
  );
  await chmod(paths.unit, 0o644);
  out(`wrote ${paths.unit}`);

  await mkdir(paths.configDir, { recursive: true, mode: 0o755 });
  if (existsSync(paths.config) && !config.forceConfig) {
    out(`kept ${paths.config} (exists; --force-config rewrites it)`);
  } else {
    // 0644: the DynamicUser service reads it itself. A replication token in it is therefore readable by local
    // users; docs/operations.md shows how to keep it in a root-only drop-in instead.
    await writeFile(paths.config, defaultConfigText(source), { mode: 0o644 });
    out(`${config.forceConfig ? 'rewrote' : 'wrote'} ${paths.config}`);
  }
  out(describeSource(source));
  if (existsSync(paths.token)) {
    out(`kept ${paths.token}`);
  } else {
    // A fresh random token: one node works at once; every node of a cluster needs a copy of the same file.
    await writeFile(paths.token, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    out(`wrote ${paths.token} (a new random replication token, root only; copy it to the other nodes of a cluster)`);
  }
  await chmod(paths.token, 0o600);
  for (const [dir, mode] of [
    [paths.state, 0o700],
    [paths.cache, 0o700],
    [paths.logDir, 0o750],
  ] as const) {
    await mkdir(dir, { recursive: true, mode });
    out(`folder ${dir}`);
  }

  if (!h.systemdRunning) {
    out(
      paths.prefix !== ''
        ? `installed under ${paths.prefix} (STASH_KEY_SERVER_ROOT_PREFIX): systemctl not run`
        : 'systemd is not running on this system (no /run/systemd/system): the files are written, but the service was NOT enabled or started; ' +
            `once systemd runs: systemctl daemon-reload && systemctl enable --now ${UNIT_NAME}`,
    );
    return 0;
  }
  systemctlStep(h, out, ['daemon-reload']);
  systemctlStep(h, out, ['enable', '--now', UNIT_NAME]);
  out(`installed and started ${UNIT_NAME}; logs in ${paths.log}`);
  return 0;
}

/** `uninstall [--purge-data]`. */
export async function uninstall(
  config: ServerConfig,
  out: Out,
  host?: HostFacts,
  paths: InstallPaths = installPaths(),
): Promise<number> {
  const h = host ?? realHost(paths);
  requireLinux(h, 'uninstall');
  requireRoot(h, 'uninstall');
  if (h.systemdRunning && existsSync(paths.unit)) systemctlStep(h, out, ['disable', '--now', UNIT_NAME]);
  if (existsSync(paths.unit)) {
    await rm(paths.unit, { force: true });
    out(`removed ${paths.unit}`);
  } else {
    out(`${paths.unit} was not installed`);
  }
  if (h.systemdRunning) systemctlStep(h, out, ['daemon-reload']);
  await removeExecutable(paths, out);
  if (!config.purgeData) {
    out(
      `kept ${paths.config}, ${paths.token}, ${paths.state}, ${paths.cache} and ${paths.logDir} (--purge-data removes them)`,
    );
    return 0;
  }
  for (const path of [
    paths.state,
    paths.statePrivate,
    paths.cache,
    paths.cachePrivate,
    paths.logDir,
    paths.config,
    paths.token,
  ]) {
    if (!existsSync(path)) continue;
    await rm(path, { recursive: true, force: true });
    out(`removed ${path}`);
  }
  // /etc/stash was created by install; leave it only if something else lives there (TLS files, say).
  await rmdir(paths.configDir).then(
    () => out(`removed ${paths.configDir}`),
    () => undefined,
  );
  return 0;
}

function describeSize(path: string): string {
  try {
    return `${statSync(path).size} bytes`;
  } catch {
    return 'missing';
  }
}

/** `status`: unit, config, state, log and the running server, one line each; exit 0 when installed, 3 when not. */
export async function serviceStatus(out: Out, host?: HostFacts, paths: InstallPaths = installPaths()): Promise<number> {
  const h = host ?? realHost(paths);
  requireLinux(h, 'status');
  const installed = existsSync(paths.unit);
  let unit = installed ? `${paths.unit} installed` : `${paths.unit} not installed`;
  if (installed && h.systemdRunning) {
    const enabled = h.systemctl(['is-enabled', UNIT_NAME]).output || 'unknown';
    const active = h.systemctl(['is-active', UNIT_NAME]).output || 'unknown';
    unit += `, ${enabled}, ${active}`;
  } else if (installed) {
    unit += ', systemd not running (state unknown)';
  }
  out(`unit: ${unit}`);

  let running: ServerConfig | undefined;
  if (!existsSync(paths.config)) {
    out(`config: ${paths.config} missing`);
  } else {
    try {
      const text = await readFile(paths.config, 'utf8');
      const inv = parseCommandLine(['run', '--config', paths.config], () => text);
      const c = inv.command === 'help' ? undefined : inv.config;
      running = c;
      out(
        `config: ${paths.config} ok${c ? ` (bind ${c.bind.host}:${c.bind.port}, server ${c.serverId}, cluster ${c.clusterId}, ${c.replicationPeerUrls.length} replication peer(s))` : ''}`,
      );
    } catch (err) {
      out(`config: ${paths.config} INVALID: ${(err as Error).message}`);
    }
  }

  const token = await stat(paths.token).then(
    (st) =>
      `present, mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}${st.mode & 0o077 ? ' (SHOULD BE 0600)' : ''}`,
    () => 'missing (the service will not start)',
  );
  out(`token: ${paths.token} ${installed ? token : token.replace(' (the service will not start)', '')}`);

  const stateDir = existsSync(paths.statePrivate) ? paths.statePrivate : paths.state;
  if (!existsSync(stateDir)) {
    out(`state: ${paths.state} missing`);
  } else {
    const lock = await readFile(`${stateDir}/lock`, 'utf8').catch(() => '');
    const pid = Number(lock.trim());
    const holder =
      Number.isInteger(pid) && pid > 0
        ? alive(pid)
          ? `in use by pid ${pid}`
          : `stale lock of pid ${pid}`
        : 'not in use';
    out(`state: ${stateDir}, store.log ${describeSize(`${stateDir}/store.log`)}, ${holder}`);
  }
  const log = await stat(paths.log).then(
    (s) => `${s.size} bytes, last written ${s.mtime.toISOString()}`,
    () => 'no log yet',
  );
  out(`log: ${paths.log} ${log}`);
  if (running) for (const line of await liveServerLines(running)) out(line);
  return installed ? 0 : 3;
}
