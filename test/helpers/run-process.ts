/**
 * Runs a program to its end in a session of its own (setsid: no controlling
 * terminal, so nothing it asks can reach the developer's terminal), and
 * collects what it printed. For programs other than stash (git, say); stash
 * itself runs through cliEnv().run (test/cli/harness.ts).
 */
import { spawn } from 'node:child_process';

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** stdout as the bytes it was (a binary file from `git show`). */
  bytes: Buffer;
  stderr: string;
}

/** `argv` run in `cwd` with exactly `env`, stdin closed; killed after `timeoutMs`. */
export function runProcess(
  argv: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const bytes = Buffer.concat(out);
      resolve({ code, signal, stdout: bytes.toString(), bytes, stderr });
    });
  });
}
