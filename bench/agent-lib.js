// A real session agent (`node bin/stash.js __agent`, compiled dist/) in a
// private temporary folder, for the agent and suspend scripts.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bin, dist, root } from './lib.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Environment of a private agent: its own HOME, socket folder and log; `extra` wins.
 * `stash(args, input)` runs the compiled CLI there and returns its stdout (throws with
 * its stderr on a non-zero exit).
 */
export function agentHome(extra = {}) {
  const home = mkdtempSync(join(tmpdir(), 'stash-bench-'));
  const env = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: join(home, 'config'),
    XDG_STATE_HOME: join(home, 'state'),
    XDG_DATA_HOME: join(home, 'data'),
    STASH_VAULT_DIR: join(home, 'vault'),
    STASH_SESSION_AGENT_DIR: join(home, 'run'),
    STASH_SESSION_AGENT_LOG: join(home, 'agent.log'),
    DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${join(home, 'no-bus')}`,
    ...extra,
  };
  delete env.STASH_AGENT_CONFIG;
  delete env.STASH_CONFIG;
  delete env.STASH_PASSWORD_FILE;
  return {
    home,
    env,
    dir: env.STASH_SESSION_AGENT_DIR,
    stash(args, input) {
      const r = spawnSync(process.execPath, [bin('stash.js'), ...args], { cwd: root, env, input, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`stash ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
      return r.stdout;
    },
    remove: () => rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }),
  };
}

/** Starts `stash __agent` in the foreground and connects a client. */
export async function startAgent(h, cpu) {
  const argv =
    cpu === undefined
      ? [process.execPath, bin('stash.js'), '__agent']
      : ['taskset', '-c', String(cpu), process.execPath, bin('stash.js'), '__agent'];
  const proc = spawn(argv[0], argv.slice(1), { cwd: root, env: h.env, stdio: ['ignore', 'ignore', 'inherit'] });
  const sock = join(h.dir, 'agent.sock');
  for (let i = 0; !existsSync(sock); i++) {
    if (proc.exitCode !== null || i > 250) throw new Error(`the agent did not start (exit ${proc.exitCode})`);
    await sleep(20);
  }
  const { AgentClient } = await import(dist('agent/client.js'));
  const { agentEndpoint } = await import(dist('agent/paths.js'));
  // The socket file appears at bind(), a moment before listen(): a connect in between is refused.
  let client;
  for (let i = 0; !client; i++) {
    try {
      client = await AgentClient.connect(agentEndpoint(h.env));
    } catch (err) {
      if (proc.exitCode !== null || i > 250) throw err;
      await sleep(20);
    }
  }
  return {
    proc,
    client,
    async stop() {
      try {
        await client.stop();
      } catch {
        /* already gone */
      }
      client.close();
      if (proc.exitCode === null) {
        const timer = setTimeout(() => proc.kill('SIGKILL'), 3000);
        await once(proc, 'exit');
        clearTimeout(timer);
      }
    },
  };
}
