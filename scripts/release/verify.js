// Runs one freshly built prebuild on its own platform before it is packed: a
// staged copy of the package (bin/, dist/, package.json, that one prebuild,
// node_modules linked) with no build/ folder, and scripts/release/probe.mjs run
// there by that platform's Node: natively, under qemu-user, or under Wine.
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AARCH64_SYSROOT } from './targets.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The Wine settings the tests use too: one prefix per user, kept between runs, quiet. */
export function wineEnv(extra = {}) {
  return {
    ...process.env,
    WINEPREFIX: join(tmpdir(), `stash-wine-${typeof process.getuid === 'function' ? process.getuid() : 0}`),
    WINEDEBUG: '-all',
    WINEDLLOVERRIDES: 'mscoree,mshtml=',
    NODE_SKIP_PLATFORM_CHECK: '1',
    ...extra,
  };
}

function stage(root, target, prebuild) {
  const dir = mkdtempSync(join(tmpdir(), `stash-release-${target.name}-`));
  mkdirSync(join(dir, 'prebuilds', target.name), { recursive: true });
  copyFileSync(prebuild, join(dir, 'prebuilds', target.name, 'node.napi.node'));
  cpSync(join(root, 'bin'), join(dir, 'bin'), { recursive: true });
  cpSync(join(root, 'dist'), join(dir, 'dist'), { recursive: true });
  copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
  copyFileSync(join(root, 'scripts', 'release', 'probe.mjs'), join(dir, 'probe.mjs'));
  // sodium-native ships every platform's prebuild, so the one node_modules serves all three.
  symlinkSync(resolve(root, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

function parseProbe(stdout, detail) {
  const line = stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`the probe printed no result:\n${detail}`);
  }
}

/** Waits until the agent's socket file exists (the agent started beside the probe). */
async function waitForSocket(path, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (existsSync(path)) return;
    await sleep(100);
  }
  throw new Error(`the agent under qemu did not create ${path} within ${ms} ms`);
}

async function runQemu(dir, nodeBin, timeoutMs) {
  const qemu = ['qemu-aarch64', '-L', AARCH64_SYSROOT, nodeBin];
  const agentDir = mkdtempSync(join(tmpdir(), 'stash-release-agent-'));
  const env = {
    ...process.env,
    STASH_SESSION_AGENT_DIR: agentDir,
    STASH_SESSION_AGENT_LOG: join(agentDir, 'agent.log'),
    STASH_PROBE_AUTOSTART: '0',
  };
  // Started by us through qemu: the probe's autostart would exec the arm64 node by its own path.
  const agent = spawn(qemu[0], [...qemu.slice(1), 'bin/stash.js', '__agent'], { cwd: dir, env, stdio: 'ignore' });
  try {
    await waitForSocket(join(agentDir, 'agent.sock'), timeoutMs);
    const r = spawnSync(qemu[0], [...qemu.slice(1), 'probe.mjs'], {
      cwd: dir,
      env,
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    return { status: r.status, stdout: r.stdout ?? '', detail: `${r.stdout}\n${r.stderr}\n${r.error?.message ?? ''}` };
  } finally {
    agent.kill('SIGKILL');
    rmSync(agentDir, { recursive: true, force: true });
  }
}

function runWine(dir, nodeExe, timeoutMs) {
  // Wine's console pipes are not streams Node can open: stdout and stderr go to files.
  const outFd = openSync(join(dir, 'out.txt'), 'w');
  const errFd = openSync(join(dir, 'err.txt'), 'w');
  const env = wineEnv({
    STASH_SESSION_AGENT_DIR: `C:\\stash-release-${process.pid}`,
    STASH_SESSION_AGENT_LOG: `Z:${join(dir, 'agent.log').replace(/\//g, '\\')}`,
  });
  const r = spawnSync('wine', [nodeExe, 'probe.mjs'], {
    cwd: dir,
    env,
    stdio: ['ignore', outFd, errFd],
    timeout: timeoutMs,
  });
  closeSync(outFd);
  closeSync(errFd);
  const stdout = readFileSync(join(dir, 'out.txt'), 'utf8');
  return {
    status: r.status,
    stdout,
    detail: `${stdout}\n${readFileSync(join(dir, 'err.txt'), 'utf8')}\n${r.error?.message ?? ''}`,
  };
}

function runNative(dir, timeoutMs) {
  const agentDir = mkdtempSync(join(tmpdir(), 'stash-release-agent-'));
  try {
    const env = {
      ...process.env,
      STASH_SESSION_AGENT_DIR: agentDir,
      STASH_SESSION_AGENT_LOG: join(agentDir, 'agent.log'),
    };
    const r = spawnSync(process.execPath, ['probe.mjs'], { cwd: dir, env, encoding: 'utf8', timeout: timeoutMs });
    return { status: r.status, stdout: r.stdout ?? '', detail: `${r.stdout}\n${r.stderr}\n${r.error?.message ?? ''}` };
  } finally {
    rmSync(agentDir, { recursive: true, force: true });
  }
}

/**
 * Runs the probe for `target` against `prebuild`; `node` is the target's Node
 * (bin/node or bin/node.exe) for cross targets. Returns the probe's report;
 * throws with the probe's output when anything did not hold.
 */
export async function verifyPrebuild(root, target, prebuild, node, timeoutMs = 180_000) {
  const dir = stage(root, target, prebuild);
  try {
    const run =
      target.runner === 'qemu'
        ? await runQemu(dir, node, timeoutMs)
        : target.runner === 'wine'
          ? runWine(dir, node, timeoutMs)
          : runNative(dir, timeoutMs);
    const report = parseProbe(run.stdout, run.detail);
    const [platform, arch] = target.name.split('-');
    const problems = [];
    if (run.status !== 0) problems.push(`exit status ${run.status}`);
    if (report.error) problems.push(report.error);
    if (report.platform !== platform || report.arch !== arch) problems.push(`ran as ${report.platform}-${report.arch}`);
    if (report.addon !== `prebuilds/${target.name}/node.napi.node`) problems.push(`addon came from ${report.addon}`);
    if (
      platform === 'win32'
        ? !(report.processInfo?.ppid && report.processInfo?.startTime)
        : !(report.peer?.pid && report.peer?.uid)
    ) {
      problems.push(`identity check failed: ${JSON.stringify(report.peer ?? report.processInfo)}`);
    }
    if (report.roundTrip !== true) problems.push('agent put/get round trip failed');
    if (problems.length > 0) throw new Error(`${target.name}: ${problems.join('; ')}\n${run.detail}`);
    return report;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
