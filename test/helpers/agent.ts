/**
 * Starting a real agent process (`node bin/stash.js __agent`, the compiled
 * dist/) in a private socket folder, for tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { readProcInfo } from '../../src/agent/proc-info/index.js';
import { privateAgentEnv, waitListening } from './agent-env.js';

export { accepts } from './agent-env.js';
import { returnCodeCache, seedCodeCache } from './code-cache-seed.js';

export const stashBin = join(process.cwd(), 'bin', 'stash.js');

export interface TestAgentEnv {
  dir: string;
  home: string;
  logPath: string;
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

/** A fresh environment: private socket folder, log file, no config file, no logind (agent-env.js). */
export function agentEnv(extra: NodeJS.ProcessEnv = {}): TestAgentEnv {
  const home = mkdtempSync(join(tmpdir(), 'stash-agent-test-'));
  const env = privateAgentEnv(home, extra);
  const dir = env.STASH_SESSION_AGENT_DIR!;
  const logPath = env.STASH_SESSION_AGENT_LOG!;
  // The run's warm code cache (test/helpers/code-cache-seed.ts), unless this environment
  // brings its own cache folder or opts out.
  const seed = env.STASH_TEST_CODE_CACHE;
  delete env.STASH_TEST_CODE_CACHE;
  const seeded = seed !== undefined && extra.XDG_CACHE_HOME === undefined;
  if (seeded) seedCodeCache(seed, env.XDG_CACHE_HOME!);
  return {
    dir,
    home,
    logPath,
    env,
    cleanup: () => {
      if (seeded) returnCodeCache(seed, env.XDG_CACHE_HOME!);
      rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    },
  };
}

/**
 * Starts `stash __agent` in the foreground (not detached) and waits until its
 * socket accepts a connection: the file exists a moment before the agent
 * listens on it (a test that connected then got ECONNREFUSED, 2026-11-23).
 */
export async function startAgent(t: TestAgentEnv, timeoutMs = 5000): Promise<ChildProcess> {
  const proc = spawn(process.execPath, [stashBin, '__agent'], { env: t.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d) => {
    stderr += d;
  });
  await waitListening(proc, join(t.dir, 'agent.sock'), timeoutMs, () => stderr);
  return proc;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Waits for a process to exit; returns its exit code (or signal), killing it after `timeoutMs`. The
 * default bound is for a loaded machine: a whole CI run (suites and Node lines at once) reaches load
 * 26 on 2 CPUs, where an agent's clean exit took more than 5 s.
 */
export async function exited(proc: ChildProcess, timeoutMs = 30_000): Promise<number | string> {
  if (proc.exitCode !== null) return proc.exitCode;
  if (proc.signalCode !== null) return proc.signalCode;
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const [code, signal] = (await once(proc, 'exit')) as [number | null, string | null];
  clearTimeout(timer);
  return code ?? signal ?? -1;
}

/** Polls until `cond` is true or the time runs out. */
export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** True while `pid` runs: a zombie (exited, not yet reaped) has ended. */
export function running(pid: number): boolean {
  const info = readProcInfo(pid);
  return info !== null && !info.zombie;
}

export function readLog(t: TestAgentEnv): string {
  return existsSync(t.logPath) ? readFileSync(t.logPath, 'utf8') : '';
}

/** Pids of live `stash __agent` processes whose environment names this socket folder. */
export function agentPids(dir: string): number[] {
  return agentPidsWith([`STASH_SESSION_AGENT_DIR=${dir}`]);
}

/** Pids of `stash __agent` processes whose environment holds any of `entries` (`NAME=value`). */
export function agentPidsWith(entries: string[]): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (!cmd.includes('__agent')) continue;
      const environ = fs.readFileSync(`/proc/${name}/environ`, 'utf8').split('\0');
      if (entries.some((e) => environ.includes(e))) out.push(Number(name));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return out;
}
