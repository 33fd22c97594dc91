/**
 * Two members writing one linked shared container at the same time, through
 * real `stash set` processes: first two vaults of one Unix user, then two
 * Unix users (through setpriv) in a group-writable folder. Every write that
 * exited 0 must be in the file as a third member reads it, every other one
 * must have exited non-zero saying what to do, and neither writer may be left
 * refused afterwards.
 */
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  addContact,
  createContainer,
  identityPublic,
  initVault,
  unlockVault,
  unwrapContentKey,
  wipe,
  writeEntry,
} from '../../src/vault/index.js';
import { exportShared, linkShared, shareContainer } from '../../src/vault/sharing/index.js';
import { agentPids, sleep } from '../helpers/agent.js';
import { haveCommand, isRoot, needFacility } from '../helpers/facility.js';
import { readableCopy, type ReadableCopy } from '../helpers/readable-copy.js';
import { tempDir } from '../keyserver/harness.js';
import { cliEnv, type CliEnv, type RunResult } from './harness.js';

const WRITES = 40;
/** The members' group in the two-user test (nobody's own group). */
const GROUP = 65534;

interface Member {
  t: CliEnv;
  key: Buffer;
  pub: { x25519: Buffer; ed25519: Buffer };
  /** Runs stash as this member (as `uid` through setpriv when it has one). */
  run(args: string[], input?: string): Promise<RunResult>;
  uid: number | null;
}

function runAs(t: CliEnv, argv: string[], args: string[], input: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, [...argv.slice(1), ...args], {
      env: { ...t.env, STASH_PASSWORD_FILE: t.pwFile },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}

/** A vault (made with the library, no agent yet), run as `uid` from `copy` when given. */
async function member(uid: number | null = null, copy: ReadableCopy | null = null): Promise<Member> {
  const t = cliEnv();
  await initVault(t.vault, Buffer.from(t.password), { kdf: 'test' });
  const key = await unlockVault(t.vault, Buffer.from(t.password));
  const p = identityPublic(t.vault, key);
  const argv =
    uid === null || copy === null
      ? [process.execPath, join(process.cwd(), 'bin', 'stash.js')]
      : [
          'setpriv',
          `--reuid=${uid}`,
          `--regid=${uid}`,
          `--groups=${GROUP}`,
          copy.node,
          join(copy.root, 'bin', 'stash.js'),
        ];
  return {
    t,
    key,
    pub: { x25519: p.x25519, ed25519: p.ed25519 },
    uid,
    run: (args, input = '') => runAs(t, argv, args, input),
  };
}

/** Gives a member's home (vault, password file) to its Unix user. */
function handOver(m: Member): void {
  const walk = (p: string): void => {
    chownSync(p, m.uid!, m.uid!);
    if (statSync(p).isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
  };
  if (m.uid !== null) walk(m.t.home);
}

async function dispose(m: Member): Promise<void> {
  await m.run(['vault', 'sessions', 'stop']);
  for (let i = 0; i < 100 && agentPids(m.t.dir).length > 0; i++) await sleep(20);
  for (const pid of agentPids(m.t.dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  wipe(m.key);
  m.t.cleanup();
}

/**
 * Alice owns `team`, shared with the two writers and Carol; the file is
 * exported to `folder` and linked there by all four.
 */
function team(alice: Member, writers: Member[], carol: Member, folder: string): string {
  const others = [...writers, carol];
  for (const [i, m] of others.entries())
    addContact(alice.t.vault, alice.key, { name: `m${i}`, email: `m${i}@example.test`, ...m.pub });
  for (const m of others) addContact(m.t.vault, m.key, { name: 'alice', email: 'alice@example.test', ...alice.pub });
  createContainer(alice.t.vault, alice.key, 'team');
  const ck = unwrapContentKey(alice.t.vault, alice.key, 'team');
  writeEntry(alice.t.vault, 'team', ck, 'START', Buffer.from('s'));
  wipe(ck);
  shareContainer(
    alice.t.vault,
    alice.key,
    'team',
    others.map((m) => m.pub),
  );
  const file = join(folder, 'team.stash');
  exportShared(alice.t.vault, 'team', file);
  for (const m of [alice, ...others]) linkShared(m.t.vault, m.key, file, 'team');
  return file;
}

/** `n` writes of `<prefix>_<i>`, two at a time. */
async function writes(m: Member, prefix: string): Promise<Array<{ entry: string; value: string; r: RunResult }>> {
  const out: Array<{ entry: string; value: string; r: RunResult }> = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < WRITES) {
      const i = next++;
      const entry = `${prefix}_${String(i).padStart(2, '0')}`;
      const value = `${prefix.toLowerCase()}-value-${i}`;
      out.push({ entry, value, r: await m.run(['set', 'team', entry], value) });
    }
  };
  await Promise.all([lane(), lane()]);
  return out;
}

/** Every entry of `team` as Carol reads it (one `stash env` child). */
async function carolReads(carol: Member): Promise<Record<string, string>> {
  const r = await carol.run([
    'env',
    'team',
    '--',
    process.execPath,
    '-e',
    'process.stdout.write(JSON.stringify(process.env))',
  ]);
  assert.is(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Record<string, string>;
}

/** The race, and what must hold after it. */
async function race(writers: [Member, Member], carol: Member): Promise<void> {
  const [a, b] = await Promise.all([writes(writers[0], 'A'), writes(writers[1], 'B')]);
  const env = await carolReads(carol);
  let acknowledged = 0;
  for (const { entry, value, r } of [...a, ...b]) {
    if (r.code === 0) {
      acknowledged++;
      assert.match(r.stdout + r.stderr, /Stored/, `${entry}: ${r.stdout}${r.stderr}`);
      assert.is(env[entry], value, `${entry} exited 0 and must be in the file`);
    } else {
      // Refused: it says what to do, in one line.
      assert.is(r.code, 75, `${entry}: ${r.code}: ${r.stderr}`);
      assert.match(r.stderr, /^stash: [^\n]*run the command again[^\n]*\n$/, `${entry}: ${r.stderr}`);
    }
  }
  console.log(`  ${acknowledged} of ${2 * WRITES} writes exited 0, every one of them in the file`);
  for (const [m, entry] of [
    [writers[0], 'AFTER_A'],
    [writers[1], 'AFTER_B'],
  ] as const) {
    const r = await m.run(['set', 'team', entry], 'after');
    assert.is(r.code, 0, `${entry}: the writer is not left refused: ${r.stderr}`);
  }
  const after = await carolReads(carol);
  assert.equal([after.AFTER_A, after.AFTER_B], ['after', 'after']);
}

test('two vaults of one user write 40 entries each at once: every acknowledged write is kept', async () => {
  const dir = tempDir('teams-concurrent');
  const people = [await member(), await member(), await member(), await member()];
  try {
    const [alice, w1, w2, carol] = people as [Member, Member, Member, Member];
    team(alice, [w1, w2], carol, dir.path);
    await race([w1, w2], carol);
  } finally {
    for (const m of people) await dispose(m);
    dir.remove();
  }
});

test("two Unix users in a group-writable folder write 40 entries each at once: each reads the other's writes, none is lost", async () => {
  if (!needFacility(isRoot && haveCommand('setpriv'), 'second uid', 'needs root and setpriv')) return;
  const dir = tempDir('teams-two-users');
  chmodSync(dir.path, 0o755);
  const folder = join(dir.path, 'shared');
  mkdirSync(folder);
  chownSync(folder, 0, GROUP);
  chmodSync(folder, 0o2775); // the members' group may write, new files get that group
  const copy = readableCopy([], { dependencies: true });
  const people = [await member(), await member(65533, copy), await member(65534, copy), await member()];
  try {
    const [alice, w1, w2, carol] = people as [Member, Member, Member, Member];
    const file = team(alice, [w1, w2], carol, folder);
    assert.is(statSync(file).mode & 0o777, 0o664 & ~process.umask(), 'a new shared file: 0664 less the umask');
    handOver(w1);
    handOver(w2);
    await race([w1, w2], carol);
    const st = statSync(file);
    assert.is(st.mode & 0o777, 0o664 & ~process.umask(), "the file kept its mode through both users' writes");
    assert.is(st.gid, GROUP, 'and its group');
  } finally {
    for (const m of people) await dispose(m);
    copy.remove();
    dir.remove();
  }
});

test.run();
