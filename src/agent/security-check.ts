/**
 * `stash __agent_security_check`: the posture an agent started now would have.
 * Prints one line per check (or --json) and exits 1 when anything is unsafe.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorMessage } from '../errors.js';
import { agentDirFix, agentEndpoint, checkAgentDir } from './paths.js';
import { LOCKED_BYTES_NEEDED } from './limits.js';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** What the user can do, where the check knows better than a generic hint. */
  fix?: string;
}

async function peerCredentialCheck(): Promise<Check> {
  if (process.platform === 'win32') {
    return { name: 'peer credentials', ok: true, detail: 'named pipe: owner-only DACL and client process identity' };
  }
  const { peerCredentials } = await import('../native/index.js');
  const dir = mkdtempSync(join(tmpdir(), 'stash-check-'));
  const path = join(dir, 'probe.sock');
  const server = createServer();
  try {
    const accepted = once(server, 'connection');
    server.listen(path);
    await once(server, 'listening');
    const client = connect(path);
    const [socket] = (await accepted) as [import('node:net').Socket];
    const cred = peerCredentials(socket);
    client.destroy();
    socket.destroy();
    const ok = cred.pid === process.pid && cred.uid === process.getuid?.();
    return {
      name: 'peer credentials',
      ok,
      detail: ok
        ? 'SO_PEERCRED/getpeereid works'
        : `kernel reported pid ${cred.pid} uid ${cred.uid}, expected ${process.pid}`,
    };
  } catch (err) {
    return { name: 'peer credentials', ok: false, detail: errorMessage(err) };
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function hardeningChecks(): Promise<Check[]> {
  try {
    const { hardenProcess } = await import('../native/index.js');
    const report = hardenProcess();
    const checks: Check[] = [
      {
        name: 'dumpable',
        ok: !report.dumpable,
        detail: report.dumpable
          ? 'process is still dumpable after hardening'
          : `not dumpable (${report.actions.join(', ')})`,
      },
      {
        name: 'core dumps',
        ok: report.coreLimit === null || report.coreLimit.soft === 0,
        detail: report.coreLimit === null ? 'suppressed (SetErrorMode)' : `RLIMIT_CORE ${report.coreLimit.soft}`,
      },
    ];
    const lock = report.memlockLimit;
    if (lock) {
      const ok = lock.soft === -1 || lock.soft >= LOCKED_BYTES_NEEDED;
      const kib = (n: number): string => (n === -1 ? 'unlimited' : `${Math.floor(n / 1024)} KiB`);
      checks.push({
        name: 'mlock limit',
        ok,
        detail: `${kib(lock.soft)} (a full cache needs ${kib(LOCKED_BYTES_NEEDED)})${ok ? '' : '; raise it with `ulimit -l` or limits.conf'}`,
      });
    }
    return checks;
  } catch (err) {
    return [{ name: 'hardening', ok: false, detail: errorMessage(err) }];
  }
}

/** Runs every check; exported for doctor. */
export async function securityChecks(): Promise<Check[]> {
  const endpoint = agentEndpoint();
  const checks: Check[] = [];
  if (endpoint.dir) {
    const dir = checkAgentDir(endpoint.dir);
    const mode = dir.mode === null ? 'not created yet (will be 0700)' : `mode ${dir.mode.toString(8).padStart(4, '0')}`;
    checks.push({
      name: 'socket folder',
      ok: dir.ok,
      detail: `${endpoint.dir} (${endpoint.source}): ${dir.problem ?? mode}`,
      ...(dir.ok ? {} : { fix: agentDirFix(endpoint, dir) }),
    });
  } else {
    checks.push({ name: 'named pipe', ok: true, detail: endpoint.path });
  }
  checks.push(await peerCredentialCheck());
  checks.push(...(await hardeningChecks()));
  return checks;
}

export async function runSecurityCheck(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const unknown = argv.filter((a) => a !== '--json');
  if (unknown.length > 0) {
    process.stderr.write(
      `stash: __agent_security_check: unknown argument ${unknown[0]}\nusage: stash __agent_security_check [--json]\n`,
    );
    return 64;
  }
  const checks = await securityChecks();
  const ok = checks.every((c) => c.ok);
  if (json) process.stdout.write(`${JSON.stringify({ ok, checks }, null, 2)}\n`);
  else {
    for (const c of checks) process.stdout.write(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
    process.stdout.write(ok ? 'agent security posture: safe\n' : 'agent security posture: UNSAFE\n');
  }
  return ok ? 0 : 1;
}
