// The environment and start-up wait of a private session agent, shared by the tests
// (test/helpers/agent.ts) and the benchmarks (bench/agent-lib.js), so that the two
// cannot drift apart again (bench had no XDG_CACHE_HOME, so its CLI runs wrote their
// code cache into the user's own cache folder when XDG_CACHE_HOME was set). Plain
// JavaScript with its types beside it (agent-env.d.ts): bench/ runs as plain node,
// while test/ is TypeScript the test runner compiles; a .js file both can import
// as it is is the one copy that works for both.
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';

/**
 * The environment of an agent whose every file is inside `home`: its own HOME,
 * XDG folders, socket folder and log, no config file, no system bus (a test or
 * benchmark brings its own logind stand-in) and no session bus (a desktop's
 * screensaver would lock it). `extra` wins; a variable set to undefined there
 * is left out.
 */
export function privateAgentEnv(home, extra = {}) {
  const env = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: join(home, 'config'),
    XDG_STATE_HOME: join(home, 'state'),
    XDG_CACHE_HOME: join(home, 'cache'),
    STASH_SESSION_AGENT_DIR: join(home, 'run'),
    // The uid's runtime folder the CLI also looks in for an agent (src/agent/paths.ts): never this machine's /run/user.
    STASH_RUN_USER_DIR: join(home, 'run-user'),
    STASH_SESSION_AGENT_LOG: join(home, 'agent.log'),
    DBUS_SYSTEM_BUS_ADDRESS: `unix:path=${join(home, 'no-bus')}`,
    DBUS_SESSION_BUS_ADDRESS: `unix:path=${join(home, 'no-session-bus')}`,
    XDG_SESSION_ID: undefined,
    ...extra,
  };
  delete env.STASH_AGENT_CONFIG;
  delete env.STASH_CONFIG;
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  return env;
}

/** True when a connection to the Unix socket `path` is accepted. */
export function accepts(path) {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Waits until the agent `proc` accepts connections on `sock`: the file exists a
 * moment before the agent listens on it (a test that connected then got
 * ECONNREFUSED, 2026-11-23). Throws when the agent exits first or `timeoutMs`
 * passes; `stderr()` is added to the message.
 */
export async function waitListening(proc, sock, timeoutMs = 5000, stderr = () => '') {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(sock) || !(await accepts(sock))) {
    if (proc.exitCode !== null) throw new Error(`agent exited with ${proc.exitCode}: ${stderr()}`);
    if (Date.now() > deadline) throw new Error(`agent did not start listening on ${sock}: ${stderr()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
