/**
 * A real Secret Service for tests: a private `dbus-daemon --session` and
 * `gnome-keyring-daemon --foreground --components=secrets --unlock` on it, with
 * its login keyring created (and unlocked) from a password on stdin, in a
 * temporary HOME. Both processes are killed on stop() and on process exit.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { sleep } from '../helpers/agent.js';

export interface SecretService {
  /** DBUS_SESSION_BUS_ADDRESS of the private bus. */
  address: string;
  stop(): Promise<void>;
}

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

export function secretServiceFacility(): { available: boolean; reason: string } {
  const missing = ['dbus-daemon', 'gnome-keyring-daemon', 'busctl'].filter((c) => !has(c));
  return {
    available: missing.length === 0,
    reason: `missing ${missing.join(', ')} (apt-get install dbus-daemon gnome-keyring systemd)`,
  };
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
  await gone;
  clearTimeout(timer);
}

function hasOwner(address: string, name: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(
      'busctl',
      [
        `--address=${address}`,
        '--json=short',
        'call',
        'org.freedesktop.DBus',
        '/org/freedesktop/DBus',
        'org.freedesktop.DBus',
        'NameHasOwner',
        's',
        name,
      ],
      { timeout: 3000 },
      (err, stdout) => {
        resolve(!err && /"data":\[true\]/.test(stdout));
      },
    );
  });
}

export async function startSecretService(): Promise<SecretService> {
  const home = mkdtempSync(join(tmpdir(), 'stash-keyring-'));
  const runtime = join(home, 'run');
  mkdirSync(runtime, { mode: 0o700 });
  const env = {
    ...process.env,
    HOME: home,
    XDG_DATA_HOME: join(home, 'data'),
    XDG_RUNTIME_DIR: runtime,
    XDG_CONFIG_HOME: join(home, 'config'),
  };
  const bus = spawn('dbus-daemon', ['--session', '--nofork', '--print-address'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(bus);
  const address = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('dbus-daemon printed no address')), 5000);
    bus.stdout!.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl).trim());
      }
    });
    bus.once('exit', (code) => reject(new Error(`dbus-daemon exited (${code})`)));
  });
  const keyring = spawn('gnome-keyring-daemon', ['--foreground', '--components=secrets', '--unlock'], {
    env: { ...env, DBUS_SESSION_BUS_ADDRESS: address },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  children.add(keyring);
  let keyringErr = '';
  keyring.stderr!.on('data', (d) => {
    keyringErr += d;
  });
  keyring.stdin!.end('login keyring password'); // --unlock reads it from stdin
  const deadline = Date.now() + 10_000;
  while (!(await hasOwner(address, 'org.freedesktop.secrets'))) {
    if (keyring.exitCode !== null) throw new Error(`gnome-keyring-daemon exited (${keyring.exitCode}): ${keyringErr}`);
    if (Date.now() > deadline)
      throw new Error(`gnome-keyring-daemon did not take org.freedesktop.secrets: ${keyringErr}`);
    await sleep(50);
  }
  return {
    address,
    async stop() {
      await kill(keyring);
      await kill(bus);
      children.delete(keyring);
      children.delete(bus);
      rmSync(home, { recursive: true, force: true });
    },
  };
}
