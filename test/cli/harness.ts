/**
 * Running the real `node bin/stash.js` (compiled dist/) for end-to-end tests:
 * a private vault folder, agent socket folder, HOME and XDG folders (from
 * agentEnv), the 'test' Argon2id preset, and helpers to drive a command on a
 * pseudo-terminal. Every command runs in its own session (setsid), so it has
 * no controlling terminal unless the test gives it one with `pty()`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentEnv, agentPidsWith, sleep, stashBin, type TestAgentEnv } from '../helpers/agent.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';

export const python = '/usr/bin/python3';
export const ptyRunner = join(process.cwd(), 'test', 'fixtures', 'pty-run.py');

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface PtyResult {
  output: string;
  status: number;
  answered: number;
  killed: boolean;
}

export interface CliEnv extends TestAgentEnv {
  vault: string;
  /** A password file (0600) holding `password`. */
  pwFile: string;
  password: string;
  /**
   * Runs stash with `args`; `input` is written to its stdin (else stdin is empty). `wrap`: a
   * command that runs it (`unshare ... sh -c '...; exec "$@"' sh`), the node command appended.
   */
  run(
    args: string[],
    opts?: { input?: string | Buffer; env?: NodeJS.ProcessEnv; timeoutMs?: number; wrap?: string[] },
  ): Promise<RunResult>;
  /** Runs stash on a pseudo-terminal, answering prompts: [[regex, answer], ...]. */
  pty(args: string[], script: Array<[string, string]>, opts?: { env?: NodeJS.ProcessEnv }): PtyResult;
  /** Creates a vault (password from pwFile) with the given containers. */
  initVault(containers?: string[]): Promise<void>;
  /** Stops the agent of this environment and waits until no agent process remains. */
  stopAgents(): Promise<void>;
  /** Stops agents, then removes the folders. */
  dispose(): Promise<void>;
}

/** True when the pty driver can run here. */
export function havePty(): boolean {
  return existsSync(python) && spawnSync(python, ['-c', 'import pty'], { stdio: 'ignore' }).status === 0;
}

export function cliEnv(extra: NodeJS.ProcessEnv = {}): CliEnv {
  const t = agentEnv({
    STASH_KDF: 'test',
    STASH_PASSWORD_FILE: undefined,
    STASH_DEBUG: undefined,
    NO_COLOR: undefined,
    ...extra,
  });
  const vault = join(t.home, 'vault');
  t.env.STASH_VAULT_DIR = extra.STASH_VAULT_DIR ?? vault;
  const password = 'correct horse battery staple';
  const pwFile = join(t.home, 'password');
  writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });

  const run: CliEnv['run'] = (args, opts = {}) =>
    new Promise((resolve, reject) => {
      const argv = [...(opts.wrap ?? []), process.execPath, stashBin, ...args];
      const child = spawn(argv[0]!, argv.slice(1), {
        env: { ...t.env, ...opts.env },
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true, // setsid: no controlling terminal, so no prompt can reach the developer's terminal
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => {
        stdout += d;
      });
      child.stderr.on('data', (d) => {
        stderr += d;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 20_000);
      child.on('error', reject);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout, stderr });
      });
      child.stdin.on('error', () => {
        /* the command may exit without reading */
      });
      child.stdin.end(opts.input ?? '');
    });

  const pty: CliEnv['pty'] = (args, script, opts = {}) => {
    const r = spawnSync(python, [ptyRunner, process.execPath, stashBin, ...args], {
      env: { ...t.env, ...opts.env, PTY_SCRIPT: JSON.stringify(script) },
      encoding: 'utf8',
      timeout: 30_000,
    });
    if (r.status !== 0 && !r.stdout) throw new Error(`pty-run failed: ${r.stderr}`);
    return JSON.parse(r.stdout) as PtyResult;
  };

  // SIGTERM, which the agent takes as `vault sessions stop` (it wipes its keys and removes its socket), sent
  // straight to this environment's agents: a `stash` process for it cost about 70 ms of CPU per environment,
  // one even where no agent ever ran. The tests of `vault sessions stop` run the command themselves.
  // Its agents: by socket folder, or by HOME for one started where STASH_SESSION_AGENT_DIR was unset (the fallback folder).
  const ours = (): number[] => agentPidsWith([`STASH_SESSION_AGENT_DIR=${t.dir}`, `HOME=${t.home}`]);
  const stopAgents = async (): Promise<void> => {
    const signal = (sig: NodeJS.Signals): void => {
      for (const pid of ours()) {
        try {
          process.kill(pid, sig);
        } catch {
          /* gone */
        }
      }
    };
    signal('SIGTERM');
    for (let i = 0; i < 100 && ours().length > 0; i++) await sleep(20);
    signal('SIGKILL');
  };

  return {
    ...t,
    vault: t.env.STASH_VAULT_DIR,
    pwFile,
    password,
    run,
    pty,
    async initVault(containers = []) {
      const init = await run(['vault', 'init', '--password-file', pwFile]);
      if (init.code !== 0) throw new Error(`vault init failed: ${init.stderr}`);
      for (const c of containers) {
        const r = await run(['container', 'create', c, '--password-file', pwFile]);
        if (r.code !== 0) throw new Error(`container create ${c} failed: ${r.stderr}`);
      }
    },
    stopAgents,
    async dispose() {
      await stopAgents();
      if (existsSync(pwFile)) chmodSync(pwFile, 0o600);
      t.cleanup();
    },
  };
}

/** Every file under `dir` with its bytes, for "nothing changed" assertions. */
export function snapshot(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.set(p, readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

/**
 * A new folder on a disk, for the tests of where plaintext goes: in the checkout's
 * node_modules/.cache, as /tmp may be a tmpfs (the caller checks that it is not one).
 */
export function diskFolder(prefix: string): string {
  const cache = join(process.cwd(), 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  return mkdtempSync(join(cache, prefix));
}

/**
 * The `wrap` of run() that gives stash a /dev/shm that is `folder`, in a mount namespace of
 * its own, so that no tmpfs is at hand; null (the test skipped, with the reason) without root
 * and unshare.
 */
export function shmReplacedBy(folder: string): string[] | null {
  if (!needFacility(isRoot && haveCommand('unshare'), 'a mount namespace', 'needs root and unshare (util-linux)'))
    return null;
  const script = 'mount --bind "$1" /dev/shm && shift && exec "$@"';
  return ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', script, 'sh', folder];
}

/** One environment that several tests of a suite share: see `sharedCliEnv`. */
export interface SharedCliEnv {
  /**
   * The shared environment for one test, made on the first call (`vault init`, which starts its agent).
   * The agent forgets every key an earlier test left, then `containers` are created in the shared vault
   * (with the password file, which caches the vault key): the agent holds what a fresh `initVault(containers)`
   * would leave. Each name may be asked for once per suite, so no test reads or writes another's container.
   */
  fresh(containers: string[]): Promise<CliEnv>;
  /** Disposes of the environment, if it was made: call it from the suite's `test.after`. */
  dispose(): Promise<void>;
}

/**
 * One HOME, vault and agent for the tests of a suite that need nothing of their own. Each test that
 * shares skips a `vault init` and an agent's start, about 0.2-0.25 s of CPU under a CI-like load (ten
 * environments: 6.9-9.2 s private, 5.4-7.0 s shared), and CI runs the CLI suites under four Node lines.
 * A test that changes the vault itself (init, passwd, contacts, vault.json), stops or counts agents or
 * their activities, needs its own environment variables or an empty code cache, or asserts on what spans
 * containers (`find`, `container list`, the whole `vault sessions` list) keeps its own `cliEnv()`. With
 * no containers, `fresh` leaves no key cached (initVault() leaves the vault key).
 */
export function sharedCliEnv(extra: NodeJS.ProcessEnv = {}): SharedCliEnv {
  let made: Promise<CliEnv> | undefined;
  const taken = new Set<string>();
  const forgetAll = async (t: CliEnv): Promise<void> => {
    const { AgentClient } = await import('../../src/agent/client.js');
    const { agentEndpoint } = await import('../../src/agent/paths.js');
    const agent = await AgentClient.connect(agentEndpoint(t.env)).catch(() => null);
    if (agent === null) return; // no agent runs (it exited idle): nothing is cached
    try {
      await agent.forgetAll();
    } finally {
      agent.close();
    }
  };
  return {
    async fresh(containers) {
      for (const c of containers) {
        if (taken.has(c)) throw new Error(`container ${c} of the shared environment is taken by an earlier test`);
        taken.add(c);
      }
      made ??= (async () => {
        const t = cliEnv(extra);
        await t.initVault();
        return t;
      })();
      const t = await made;
      await forgetAll(t);
      for (const c of containers) {
        const r = await t.run(['container', 'create', c, '--password-file', t.pwFile]);
        if (r.code !== 0) throw new Error(`container create ${c} failed: ${r.stderr}`);
      }
      return t;
    },
    async dispose() {
      if (made) await (await made).dispose();
    },
  };
}
