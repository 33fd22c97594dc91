#!/usr/bin/env node
// `npm run demo`: the whole product in one run, on loopback, cleaned up afterwards.
//
// Starts a developer key server on 127.0.0.1 whose "mail" command confirms the
// verification link by POST (scripts/demo-mail-confirm.js), makes two
// throwaway vaults (Alice and Bob) in a temporary folder, each with its own
// vault folder, agent folder and password file, lets Alice publish her public
// key and Bob receive it with her fingerprint, shows the keys Bob's session
// agent caches, then stops both agents and the server and removes the folder,
// also after a failure or Ctrl-C. Every step prints the command a user would
// type and its output. Uses the compiled dist/ through bin/, like an install.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stashBin = join(root, 'bin', 'stash.js');
const serverBin = join(root, 'bin', 'stash_key_server.js');
const mailCommand = join(root, 'scripts', 'demo-mail-confirm.js');
const COMMAND_TIMEOUT_MS = 60_000;

class DemoError extends Error {}

// ---- output -----------------------------------------------------------------

let stepNo = 0;
const say = (line = '') => process.stdout.write(`${line}\n`);
const indent = (text) =>
  text
    .replace(/\s+$/, '')
    .split('\n')
    .filter((l, _i, a) => a.length > 1 || l !== '')
    .map((l) => `    ${l}`)
    .join('\n');
function step(title) {
  stepNo += 1;
  say('');
  say(`== ${stepNo}. ${title}`);
}
function showRun(who, shown, result) {
  say(`${who}$ ${shown}`);
  const text = `${result.stdout}${result.stderr}`;
  if (text.trim()) say(indent(text));
  if (result.code !== 0) say(`    (exit status ${result.code})`);
}

// ---- state shared with cleanup ----------------------------------------------

const state = { tmp: null, server: null, people: [], child: null, cleaning: null };

function makeTemp() {
  state.tmp = mkdtempSync(join(tmpdir(), 'stash-demo-'));
  return state.tmp;
}

/** Alice or Bob: a vault folder, an agent folder, a password file (0600) and a private HOME. */
function person(name) {
  const home = join(state.tmp, name.toLowerCase());
  mkdirSync(home, { mode: 0o700 });
  const passwordFile = join(home, 'password');
  writeFileSync(passwordFile, `${name}'s demo password ${randomBytes(6).toString('hex')}\n`, { mode: 0o600 });
  const env = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: join(home, 'config'),
    XDG_STATE_HOME: join(home, 'state'),
    XDG_DATA_HOME: join(home, 'data'),
    STASH_VAULT_DIR: join(home, 'vault'),
    STASH_SESSION_AGENT_DIR: join(home, 'agent'),
    STASH_SESSION_AGENT_LOG: join(home, 'agent.log'),
    STASH_PASSWORD_FILE: passwordFile,
    NO_COLOR: '1',
  };
  // The demo must not pick up the user's own settings.
  for (const k of ['STASH_AGENT_CONFIG', 'STASH_CONFIG', 'STASH_KEY_SERVER_URL', 'STASH_KDF']) delete env[k];
  const p = { name, home, env, passwordFile };
  state.people.push(p);
  return p;
}

// ---- processes --------------------------------------------------------------

const never = new Promise(() => {});

/**
 * Runs `stash ARGS` as `who` (in its own session: no prompt can reach this
 * terminal). After Ctrl-C only cleanup may start commands; a demo step that
 * was about to start one waits for the signal handler to exit instead.
 */
function stash(who, args, { cleanup = false, input = null } = {}) {
  if (interrupted && !cleanup) return never;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [stashBin, ...args], {
      env: who.env,
      stdio: [input === null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
    if (input !== null) child.stdin.end(input);
    state.child = child;
    child.closed = new Promise((done) => child.on('close', done));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), COMMAND_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new DemoError(`cannot run stash: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      state.child = null;
      resolve({ code: code ?? 128, signal, stdout, stderr });
    });
  });
}

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

/** Runs, narrates, and checks the exit status. */
async function narrate(who, args, { shown, expect = 0, input = null } = {}) {
  const result = await stash(who, args, { input });
  if (interrupted) await never; // the signal handler cleans up and exits
  showRun(`${who.name} `, shown ?? `stash ${args.join(' ')}`, result);
  if (result.code !== expect) {
    throw new DemoError(
      `\`stash ${args.join(' ')}\` (as ${who.name}) exited with ${result.signal ?? result.code}, expected ${expect}`,
    );
  }
  return result;
}

/** Starts the developer key server on a free loopback port; resolves with its URL. */
function startServer() {
  const serverTmp = join(state.tmp, 'server');
  mkdirSync(serverTmp, { mode: 0o700 });
  const args = ['run', '--developer', '--bind', '127.0.0.1:0', '--verification-email-command', mailCommand];
  say(`$ stash_key_server ${args.join(' ').replace(mailCommand, 'scripts/demo-mail-confirm.js')}`);
  // TMPDIR inside the demo folder: the server's developer state folder goes there too.
  const child = spawn(process.execPath, [serverBin, ...args], {
    env: { ...process.env, TMPDIR: serverTmp },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const server = { child, url: null, log: [], shown: 0, exited: null };
  state.server = server;
  let pending = '';
  const onLine = (line) => server.log.push(line);
  const feed = (d) => {
    pending += d;
    for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
      onLine(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
    }
  };
  child.stdout.on('data', feed);
  child.stderr.on('data', feed);
  server.exited = new Promise((done) => child.on('close', (code, signal) => done(code ?? signal)));
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(
      () => reject(new DemoError(`the key server did not start within 15 seconds:\n${server.log.join('\n')}`)),
      15_000,
    );
    const check = () => {
      if (server.url) return;
      const line = server.log.find((l) => l.includes('listening on '));
      const m = line && /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (m) {
        clearTimeout(deadline);
        server.url = m[1];
        showServerLog();
        resolve(server.url);
      }
    };
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    server.exited.then((code) => {
      clearTimeout(deadline);
      reject(new DemoError(`the key server exited (${code}) before it was ready:\n${server.log.join('\n')}`));
    });
  });
}

/** Prints the server's log lines that arrived since the last call. */
function showServerLog() {
  const s = state.server;
  if (!s) return;
  for (const line of s.log.slice(s.shown)) say(`    key server | ${line.replace(/^\S+Z /, '')}`);
  s.shown = s.log.length;
}

async function stopServer() {
  const s = state.server;
  if (!s) return;
  state.server = null;
  killGroup(s.child, 'SIGTERM');
  const timer = setTimeout(() => killGroup(s.child, 'SIGKILL'), 5000);
  await s.exited;
  clearTimeout(timer);
}

// ---- cleanup ----------------------------------------------------------------

/** Stops what the demo started and removes its folder; safe to call twice. */
function cleanup(narrated) {
  state.cleaning ??= (async () => {
    const running = state.child;
    if (running) {
      // The interrupted step's command must be gone before its folder is removed.
      killGroup(running, 'SIGTERM');
      const timer = setTimeout(() => killGroup(running, 'SIGKILL'), 5000);
      await running.closed;
      clearTimeout(timer);
    }
    for (const p of state.people) {
      const result = await stash(p, ['vault', 'sessions', 'stop'], { cleanup: true }).catch((err) => ({
        code: 1,
        stdout: '',
        stderr: String(err),
      }));
      if (narrated) showRun(`${p.name} `, 'stash vault sessions stop', result);
    }
    await stopServer();
    if (narrated) say('key server stopped');
    if (state.tmp) {
      rmSync(state.tmp, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
      if (narrated) say(`removed ${state.tmp}`);
    }
  })();
  return state.cleaning;
}

let interrupted = false;
for (const [signal, status] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
]) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\ndemo: ${signal}: stopping the agents and the key server, removing the temporary folder\n`);
    cleanup(false).finally(() => process.exit(status));
  });
}

// ---- the demo ---------------------------------------------------------------

/** A fingerprint with one group changed: what a typo, or a key swapped on the server, looks like. */
function wrongFingerprint(fp) {
  const groups = fp.split('-');
  groups[3] = groups[3] === 'ZZZZ' ? 'YYYY' : 'ZZZZ';
  return groups.join('-');
}

async function demo() {
  if (!existsSync(join(root, 'dist', 'cli', 'main.js')) || !existsSync(join(root, 'dist', 'keyserver', 'main.js'))) {
    throw new DemoError('dist/ is missing: run `npm install` (or `npm run compile`) first');
  }
  const tmp = makeTemp();
  say('stash demo: a key server, two vaults (Alice and Bob), one public key handed over and checked.');
  say(`Everything lives in ${tmp} and is removed at the end.`);

  step('Start a developer key server on loopback (its "mail" command confirms the link by POST)');
  const url = await startServer();

  const alice = person('Alice');
  const bob = person('Bob');
  say('');
  say(`Alice and Bob each get a vault folder (STASH_VAULT_DIR), a session agent folder (STASH_SESSION_AGENT_DIR)`);
  say('and a password file (mode 0600, given by STASH_PASSWORD_FILE, so no prompt appears).');

  step('Alice creates her vault');
  await narrate(alice, ['vault', 'init', '--kdf', 'interactive']);

  step('Alice looks at her fingerprint: she will read it to Bob over the phone');
  await narrate(alice, ['vault', 'identity', 'show']);
  const shown = await stash(alice, ['vault', 'identity', 'show', '--json']);
  if (shown.code !== 0) throw new DemoError(`stash vault identity show --json failed: ${shown.stderr}`);
  const fingerprint = JSON.parse(shown.stdout).fingerprint;
  say(`(the demo plays the phone call: it takes ${fingerprint} from \`stash vault identity show --json\`)`);

  step('Alice publishes her public key; the server mails her a verification link');
  const published = await narrate(alice, [
    'vault',
    'identity',
    'publish',
    '--email',
    'alice@example.test',
    '--server',
    url,
  ]);
  await waitForLog(/verify: /, 5000);
  showServerLog();
  const code = /Share code:\s+(\S+)/.exec(published.stdout)?.[1];
  if (!code) throw new DemoError('no share code in the output of publish');
  say(
    `(the demo mail command confirmed the link with a POST, like the button on the page; Alice gives Bob the code ${code})`,
  );

  step('Bob creates his vault');
  await narrate(bob, ['vault', 'init', '--kdf', 'interactive']);

  step('Bob receives the key with a wrong fingerprint: refused, nothing added');
  await narrate(
    bob,
    [
      'vault',
      'contact',
      'receive',
      code,
      '--fingerprint',
      wrongFingerprint(fingerprint),
      '--name',
      'alice',
      '--server',
      url,
    ],
    { expect: 65 },
  );

  step('Bob receives the key with the fingerprint Alice read him');
  const received = await narrate(bob, [
    'vault',
    'contact',
    'receive',
    code,
    '--fingerprint',
    fingerprint,
    '--name',
    'alice',
    '--server',
    url,
  ]);
  if (!received.stdout.includes(`Fingerprint matches: ${fingerprint}`))
    throw new DemoError('receive did not report the fingerprint match');

  step("Bob's contacts");
  const list = await narrate(bob, ['vault', 'contact', 'list']);
  if (!list.stdout.includes('alice@example.test')) throw new DemoError('the contact list does not show alice');

  step('Bob keeps a secret: a container, a value piped in, read back, and handed to a command');
  await narrate(bob, ['container', 'create', 'deploy']);
  await narrate(bob, ['set', 'deploy', 'API_TOKEN'], {
    input: 'demo-token-123\n',
    shown: 'echo demo-token-123 | stash set deploy API_TOKEN',
  });
  const got = await narrate(bob, ['get', 'deploy', 'API_TOKEN']);
  if (got.stdout !== 'demo-token-123') throw new DemoError('get did not return the stored value');
  await narrate(bob, ['ls', 'deploy']);
  const env = await narrate(
    bob,
    [
      'env',
      'deploy',
      '--',
      process.execPath,
      '-e',
      'console.log(`the command sees API_TOKEN=${process.env.API_TOKEN}`)',
    ],
    { shown: "stash env deploy -- node -e 'console.log(`the command sees API_TOKEN=${process.env.API_TOKEN}`)'" },
  );
  if (!env.stdout.includes('the command sees API_TOKEN=demo-token-123'))
    throw new DemoError('env did not hand the value to the command');

  step(
    "What Bob's session agent caches: his vault key and the deploy container's key, unlocked once, so later commands need no password",
  );
  await narrate(bob, ['vault', 'sessions']);

  step('Clean up: stop both agents (their keys are wiped) and the server, remove the folder');
  await cleanup(true);
  say('');
  say(
    'Demo complete: Alice published, the link was confirmed, Bob checked the fingerprint and saved the contact, then kept a secret and used it.',
  );
}

async function waitForLog(pattern, ms) {
  const deadline = Date.now() + ms;
  while (state.server && !state.server.log.some((l) => pattern.test(l)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
}

try {
  await demo();
  process.exitCode = 0;
} catch (err) {
  if (interrupted) await never; // the signal handler exits
  process.stderr.write(`\ndemo: FAILED: ${err instanceof DemoError ? err.message : (err?.stack ?? err)}\n`);
  showServerLog();
  await cleanup(false).catch((e) => process.stderr.write(`demo: cleanup: ${e.message}\n`));
  process.stderr.write(state.tmp ? `demo: stopped the agents and the key server, removed ${state.tmp}\n` : '');
  process.exitCode = 1;
}
