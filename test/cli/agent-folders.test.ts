/**
 * One agent per user, whatever XDG_RUNTIME_DIR says. A shell with it set
 * (the agent in $XDG_RUNTIME_DIR/stash) and one without it (su, ssh: the
 * fallback <tmpdir>/stash-<uid>) name different socket folders; a command in
 * either uses the agent that listens in the other instead of starting a
 * second one that holds no keys. Only an agent that is provably the user's is
 * used: a stale socket, a folder open to others and a listener of another uid
 * are passed over. `stash doctor` names both agents when two run.
 *
 * Each environment has its own runtime folder (STASH_RUN_USER_DIR, standing
 * for /run/user/<uid>) and TMPDIR, so nothing here looks into this machine's
 * /run/user or /tmp/stash-<uid>.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { agentCandidates } from '../../src/agent/paths.js';
import { accepts, agentPidsWith, exited, startAgent, waitFor } from '../helpers/agent.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { asNobody, readableCopy } from '../helpers/readable-copy.js';
import { cliEnv, type CliEnv } from './harness.js';

interface Folders {
  t: CliEnv;
  /** Stands for /run/user/<uid>: XDG_RUNTIME_DIR when a test sets it. */
  runUser: string;
  /** The agent's socket with XDG_RUNTIME_DIR set. */
  inRunUser: string;
  /** The agent's socket without it: <TMPDIR>/stash-<uid>. */
  inFallback: string;
}

function folders(): Folders {
  const t = cliEnv({ STASH_SESSION_AGENT_DIR: undefined, XDG_RUNTIME_DIR: undefined });
  const runUser = t.env.STASH_RUN_USER_DIR!;
  mkdirSync(runUser, { mode: 0o700 }); // as pam_systemd makes it
  const tmp = join(t.home, 'tmp');
  mkdirSync(tmp, { mode: 0o700 });
  t.env.TMPDIR = tmp;
  const uid = typeof process.getuid === 'function' ? process.getuid() : -1;
  return {
    t,
    runUser,
    inRunUser: join(runUser, 'stash', 'agent.sock'),
    inFallback: join(tmp, `stash-${uid}`, 'agent.sock'),
  };
}

const withXdg = (f: Folders): NodeJS.ProcessEnv => ({ XDG_RUNTIME_DIR: f.runUser });
const withoutXdg: NodeJS.ProcessEnv = { XDG_RUNTIME_DIR: undefined };

/** The agent processes of this environment (found by HOME); their environment is readable by root only. */
const agentsOf = (f: Folders): number[] => agentPidsWith([`HOME=${f.t.home}`]);
const canCountAgents = (): boolean =>
  needFacility(isRoot, "reading other processes' /proc environ", 'agents are non-dumpable: only root can read theirs');

/**
 * Stops the agents listening in either folder, through the socket (`vault
 * sessions stop`): the harness finds agents by their environment, which only
 * root can read.
 */
async function stopAll(f: Folders): Promise<void> {
  for (const socket of [f.inRunUser, f.inFallback]) {
    if (!(await accepts(socket))) continue;
    const stop = await f.t.run(['vault', 'sessions', 'stop'], { env: { STASH_SESSION_AGENT_DIR: dirname(socket) } });
    assert.is(stop.code, 0, stop.stderr);
    await waitFor(async () => !(await accepts(socket)), 10_000, `the agent at ${socket} to stop`);
  }
}

async function dispose(f: Folders): Promise<void> {
  await stopAll(f);
  await f.t.dispose();
}

/** Runs `body` in a fresh environment (folders()), disposed of however it ends. */
async function inFolders(body: (f: Folders) => Promise<void>): Promise<void> {
  const f = folders();
  try {
    await body(f);
  } finally {
    await dispose(f);
  }
}

/** An agent caching the key of `work`, started by commands run with `first`. */
async function cachedIn(f: Folders, first: NodeJS.ProcessEnv): Promise<void> {
  Object.assign(f.t.env, first);
  if (first.XDG_RUNTIME_DIR === undefined) delete f.t.env.XDG_RUNTIME_DIR;
  await f.t.initVault(['work']);
  const set = await f.t.run(['set', 'work', 'API_TOKEN', '--password-file', f.t.pwFile], { input: 'tok-1' });
  assert.is(set.code, 0, set.stderr);
  delete f.t.env.XDG_RUNTIME_DIR;
}

/** A vault whose container `work` holds API_TOKEN, and no agent running: the next command is a first one. */
async function vaultWithoutAgent(f: Folders): Promise<void> {
  await cachedIn(f, withoutXdg);
  await stopAll(f);
}

/** `stash get work API_TOKEN` with the password from its file, so it can open the container with or without an agent. */
const getWithPassword = (f: Folders, env: NodeJS.ProcessEnv) =>
  f.t.run(['get', 'work', 'API_TOKEN', '--password-file', f.t.pwFile], { env });

test('the folders looked in: its own first, then the runtime folder and the fallback; only its own with STASH_SESSION_AGENT_DIR', () => {
  const uid = process.getuid!();
  const env = { STASH_RUN_USER_DIR: '/r/u', TMPDIR: '/t' };
  const dirs = (e: NodeJS.ProcessEnv): Array<[string | null, string]> =>
    agentCandidates({ ...env, ...e }, 'linux').map((c) => [c.dir, c.source]);
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = '/t'; // tmpdir() reads this process's TMPDIR
  try {
    assert.equal(dirs({ XDG_RUNTIME_DIR: '/x' }), [
      ['/x/stash', 'XDG_RUNTIME_DIR'],
      ['/r/u/stash', 'run-user'],
      [`/t/stash-${uid}`, 'tmpdir'],
    ]);
    assert.equal(dirs({ XDG_RUNTIME_DIR: '/r/u/' }), [
      ['/r/u/stash', 'XDG_RUNTIME_DIR'],
      [`/t/stash-${uid}`, 'tmpdir'],
    ]);
    assert.equal(dirs({}), [
      [`/t/stash-${uid}`, 'tmpdir'],
      ['/r/u/stash', 'run-user'],
    ]);
    assert.equal(dirs({ STASH_SESSION_AGENT_DIR: '/s', XDG_RUNTIME_DIR: '/x' }), [['/s', 'STASH_SESSION_AGENT_DIR']]);
    assert.equal(agentCandidates({ STASH_RUN_USER_DIR: '' }, 'linux')[1]?.dir, `/run/user/${uid}/stash`);
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
});

for (const [name, first, then, listening, unused] of [
  ['with XDG_RUNTIME_DIR set serves a command run without it', 'set', 'unset', 'inRunUser', 'inFallback'],
  [
    'without XDG_RUNTIME_DIR (the fallback folder) serves a command run with it set',
    'unset',
    'set',
    'inFallback',
    'inRunUser',
  ],
] as const) {
  test(`an agent started ${name}: its key is used, no second agent starts`, () =>
    inFolders(async (f) => {
      await cachedIn(f, first === 'set' ? withXdg(f) : withoutXdg);
      assert.ok(await accepts(f[listening]), `the first agent listens at ${f[listening]}`);
      const pids = isRoot ? agentsOf(f) : [];
      // No password source and no terminal: only the first agent's cached key can open the container.
      const get = await f.t.run(['get', 'work', 'API_TOKEN'], { env: then === 'set' ? withXdg(f) : withoutXdg });
      assert.is(get.code, 0, get.stderr);
      assert.is(get.stdout, 'tok-1');
      assert.is(get.stderr, '');
      assert.not.ok(existsSync(f[unused]), `no agent socket at ${f[unused]}`);
      if (canCountAgents()) {
        assert.is(pids.length, 1);
        assert.equal(agentsOf(f), pids, 'the same single agent runs');
      }
    }));
}

test('first commands at once, some with XDG_RUNTIME_DIR and some without: one agent, every key in it', () =>
  inFolders(async (f) => {
    await vaultWithoutAgent(f);
    assert.not.ok(await accepts(f.inFallback), 'no agent runs before the burst');
    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, i) => getWithPassword(f, i % 2 === 0 ? withXdg(f) : withoutXdg)),
    );
    for (const r of runs) assert.is(r.code, 0, r.stderr);
    const answering = [];
    for (const s of [f.inRunUser, f.inFallback]) if (await accepts(s)) answering.push(s);
    assert.is(answering.length, 1, `agents answer at ${answering.join(' and ')}`);
    if (canCountAgents()) await waitFor(() => agentsOf(f).length === 1, 10_000, 'one agent (a loser exits at once)');
    // Both kinds of shell now get the key from that agent.
    for (const env of [withXdg(f), withoutXdg]) {
      const get = await f.t.run(['get', 'work', 'API_TOKEN'], { env });
      assert.is(get.stdout, 'tok-1', get.stderr);
    }
  }));

test('an autostart lock left by a command that died is removed by the next first command', () =>
  inFolders(async (f) => {
    await vaultWithoutAgent(f);
    const gone = spawnSync('true');
    const lock = join(f.runUser, 'stash', 'autostart.lock');
    mkdirSync(dirname(lock), { recursive: true, mode: 0o700 });
    writeFileSync(lock, `${gone.pid}\n`, { mode: 0o600 });
    const get = await getWithPassword(f, withXdg(f));
    assert.is(get.stdout, 'tok-1', get.stderr);
    assert.not.ok(existsSync(lock), "the dead holder's lock was removed, and ours released");
  }));

test('an agent in another folder is not used when its folder is open to others, nor a stale socket', () =>
  inFolders(async (f) => {
    await cachedIn(f, withXdg(f));
    const folder = join(f.runUser, 'stash');
    chmodSync(folder, 0o755);
    const get = await f.t.run(['get', 'work', 'API_TOKEN'], { env: withoutXdg });
    assert.is.not(get.code, 0, 'a password was needed: the agent in the loose folder was not asked');
    assert.match(get.stderr, /no terminal to ask on/);
    assert.ok(await accepts(f.inFallback), 'a new agent started in the fallback folder');
    chmodSync(folder, 0o700);
    await stopAll(f);
    // A socket file nobody listens on: the agent that made it was killed.
    const stale = spawnSync('python3', [
      '-c',
      'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])',
      f.inRunUser,
    ]);
    assert.is(stale.status, 0, String(stale.stderr));
    const again = await getWithPassword(f, withoutXdg);
    assert.is(again.code, 0, again.stderr);
    assert.ok(await accepts(f.inFallback), 'an agent started in the fallback folder');
    assert.not.ok(await accepts(f.inRunUser), 'the stale socket is still nobody');
  }));

test('a listener of another uid behind a socket file of ours is passed over before a byte is sent', async () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv')) return;
  const f = folders();
  const copy = readableCopy();
  const theirs = mkdtempSync(join(tmpdir(), 'stash-impostor-'));
  let impostor: ChildProcess | undefined;
  try {
    chmodSync(theirs, 0o755);
    chownSync(theirs, 65534, 65534);
    const script = `const s=require('net').createServer(c=>{let n=0;c.on('data',d=>{n+=d.length});c.on('close',()=>console.log('closed after '+n+' bytes'))});s.listen(process.argv[1],()=>console.log('listening'))`;
    const [setpriv, ...asUser] = asNobody;
    impostor = spawn(setpriv, [...asUser, copy.node, '-e', script, join(theirs, 's')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    impostor.stdout!.on('data', (d) => {
      out += d;
    });
    await waitFor(() => out.includes('listening'), 10_000, 'the impostor to listen');
    await vaultWithoutAgent(f);
    // Its socket, moved into our private folder and made ours: only the kernel's peer credentials tell.
    mkdirSync(join(f.runUser, 'stash'), { recursive: true, mode: 0o700 });
    renameSync(join(theirs, 's'), f.inRunUser);
    lchownSync(f.inRunUser, process.getuid!(), process.getgid!());
    const get = await getWithPassword(f, withoutXdg);
    assert.is(get.code, 0, get.stderr);
    assert.is(get.stdout, 'tok-1');
    assert.ok(await accepts(f.inFallback), 'our own agent started in the fallback folder');
    await waitFor(() => /closed after/.test(out), 5000, 'the connection to the impostor to close');
    assert.not.match(out, /closed after [1-9]/, `nothing was sent to the impostor: ${out}`);
  } finally {
    impostor?.kill(); // before the agents are stopped through the sockets: its own is one of them
    if (impostor) await exited(impostor);
    copy.remove();
    rmSync(theirs, { recursive: true, force: true });
    await dispose(f);
  }
});

test('doctor names both agents when two run, and its fix stops the spare one', async () => {
  const f = folders();
  const started: ChildProcess[] = [];
  try {
    await f.t.initVault([]);
    await stopAll(f);
    // Two agents, as two shells made them before this release: one per folder.
    for (const [dir, env] of [
      [join(f.runUser, 'stash'), { ...f.t.env, ...withXdg(f) }],
      [dirname(f.inFallback), f.t.env],
    ] as const) {
      started.push(await startAgent({ ...f.t, dir, env }));
    }
    const [inRunUser, inFallback] = started.map((p) => p.pid!);
    const json = await f.t.run(['doctor', '--json'], { env: withoutXdg });
    const report = JSON.parse(json.stdout) as {
      checks: Array<{ name: string; status: string; detail: string; fix?: string }>;
      agents: Array<{ pid: number; socket: string }>;
    };
    assert.equal(
      report.agents.map((a) => [a.pid, a.socket]),
      [
        [inFallback, f.inFallback],
        [inRunUser, f.inRunUser],
      ],
    );
    const two = report.checks.find((c) => c.name === 'second agent');
    assert.ok(two, 'a check names the agents');
    assert.is(two!.status, 'warn');
    assert.match(
      two!.detail,
      new RegExp(`^2 agents run for you: pid ${inFallback} at .*, used here; pid ${inRunUser} at `),
    );
    assert.is(
      two!.fix,
      `stop the one not used here (its keys are wiped): STASH_SESSION_AGENT_DIR=${join(f.runUser, 'stash')} stash vault sessions stop`,
    );
    const text = await f.t.run(['doctor'], { env: withoutXdg });
    assert.match(
      text.stdout,
      /\[warn\] second agent: 2 agents run for you: pid \d+ at .* \(the fallback folder, 0 cached key\(s\)\), used here; pid \d+ at .* \(the uid's runtime folder, 0 cached key\(s\)\)\n {7}fix: stop the one not used here/,
    );
    const stop = await f.t.run(['vault', 'sessions', 'stop'], {
      env: { STASH_SESSION_AGENT_DIR: join(f.runUser, 'stash') },
    });
    assert.is(stop.code, 0, stop.stderr);
    assert.is(await exited(started[0]!), 0);
    const after = JSON.parse((await f.t.run(['doctor', '--json'], { env: withoutXdg })).stdout) as typeof report;
    assert.is(after.agents.length, 1);
    assert.not.ok(after.checks.some((c) => c.name === 'second agent'));
  } finally {
    for (const p of started) p.kill();
    await Promise.all(started.map((p) => exited(p)));
    await dispose(f);
  }
});

test.run();
