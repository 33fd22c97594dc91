/**
 * `stash completion bash|zsh|fish`, run by the real shells: the bash script
 * registers (`complete -p stash`), and its function, called as readline
 * would, lists commands, options, containers, and a container's entries only
 * while the agent holds its key. fish's `complete -C` and an interactive zsh
 * on a pseudo-terminal (zsh/zpty) do the same. Completing never prompts,
 * never starts an agent and prints nothing on the terminal.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { agentPids, stashBin } from '../helpers/agent.js';
import { haveCommand, needFacility } from '../helpers/facility.js';
import { cliEnv, type CliEnv } from './harness.js';

/** A folder holding a `stash` that runs this checkout, first on PATH (the scripts call `command stash`). */
function pathWithStash(t: CliEnv): string {
  const bin = join(t.home, 'bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(
    join(bin, 'stash'),
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(stashBin)} "$@"\n`,
  );
  chmodSync(join(bin, 'stash'), 0o755);
  return `${bin}:${process.env.PATH}`;
}

function shell(
  t: CliEnv,
  cmd: string,
  args: string[],
  timeout = 30_000,
): { code: number | null; stdout: string; stderr: string } {
  // No STASH_PASSWORD_FILE and no terminal: any prompt would fail, not wait.
  const r = spawnSync(cmd, args, {
    env: { ...t.env, PATH: pathWithStash(t), STASH_PASSWORD_FILE: undefined },
    encoding: 'utf8',
    timeout,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** What the bash function offers for the words typed (the last one being completed). */
function bashComplete(t: CliEnv, words: string[]): string[] {
  const array = words.map((w) => `'${w.replace(/'/g, "'\\''")}'`).join(' ');
  const script = `source <(stash completion bash) || exit 9
COMP_WORDS=(stash ${array}); COMP_CWORD=${words.length}; COMP_LINE="stash ${words.join(' ')}"; COMP_POINT=\${#COMP_LINE}
_stash stash '${words[words.length - 1]}' '${words[words.length - 2] ?? 'stash'}'
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = shell(t, 'bash', ['-c', script]);
  assert.is(r.code, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean);
}

async function vaultWithEntries(): Promise<CliEnv> {
  const t = cliEnv();
  await t.initVault(['work', 'home']);
  for (const n of ['API_TOKEN', 'DB_PASSWORD'])
    assert.is((await t.run(['set', 'work', n, '--password-file', t.pwFile], { input: 'v' })).code, 0);
  await t.run(['vault', 'sessions', 'lock-all']);
  return t;
}

test('bash: the script registers; stash get <TAB> lists containers, stash get work <TAB> its entries only while work is open', async () => {
  const t = await vaultWithEntries();
  try {
    const reg = shell(t, 'bash', ['-c', 'source <(stash completion bash); complete -p stash']);
    assert.is(reg.code, 0, reg.stderr);
    assert.is(reg.stdout, 'complete -F _stash stash\n');

    assert.equal(bashComplete(t, ['get', '']), ['home', 'work']);
    assert.equal(bashComplete(t, ['get', 'w']), ['work']);
    assert.equal(bashComplete(t, ['get', 'work', '']), [], 'work is locked: no entry names, and no prompt');
    assert.is(agentPids(t.dir).length > 0, true, 'the agent of lock-all still runs');
    assert.is((await t.run(['open', 'work', '--password-file', t.pwFile])).code, 0);
    assert.equal(bashComplete(t, ['get', 'work', '']), ['API_TOKEN', 'DB_PASSWORD']);
    assert.equal(bashComplete(t, ['rm', 'work', 'DB']), ['DB_PASSWORD']);
    assert.equal(bashComplete(t, ['history', 'work', 'A']), ['API_TOKEN']);
    assert.equal(bashComplete(t, ['restore', 'work', '']), ['API_TOKEN', 'DB_PASSWORD']);
    assert.equal(bashComplete(t, ['restore', 'work', 'API_TOKEN', '--v']), ['--version']);
    assert.equal(bashComplete(t, ['rm', 'work', 'API_TOKEN', '--pu']), ['--purge']);
    assert.equal(bashComplete(t, ['get', 'home', '']), [], 'home is not open');
    await t.run(['vault', 'sessions', 'lock', 'work']);
    assert.equal(bashComplete(t, ['get', 'work', '']), [], 'locked again: nothing');

    assert.ok(bashComplete(t, ['']).includes('import'));
    assert.equal(bashComplete(t, ['con']), ['container']);
    assert.equal(bashComplete(t, ['container', 're']), ['rename']);
    assert.equal(bashComplete(t, ['vault', 'sessions', 'l']), ['lock', 'lock-all']);
    assert.equal(bashComplete(t, ['get', '--c']), ['--clip', '--clip-seconds']);
    assert.equal(bashComplete(t, ['import', '']), ['1password', 'bitwarden', 'dotenv', 'json', 'pass']);
    assert.equal(bashComplete(t, ['import', 'dotenv', 'x.env', '--into', '']), ['home', 'work']);
    assert.equal(bashComplete(t, ['env', 'work', 'h']), ['home']);
    assert.equal(bashComplete(t, ['env', '--format', '']), ['dotenv', 'json', 'shell']);
    assert.equal(bashComplete(t, ['completion', '']), ['bash', 'fish', 'zsh']);
    assert.equal(bashComplete(t, ['mv', 'w']), ['work/']);
  } finally {
    await t.dispose();
  }
});

test("bash: entry paths complete a folder at a time; ls offers folders, --field the entry's fields", async () => {
  const t = cliEnv();
  try {
    await t.initVault(['work']);
    for (const [args, input] of [
      [['set', 'work', 'web/github.com', '--password-file', t.pwFile], 'v'],
      [['set', 'work', 'web/github.com', '--field', 'username=pat', '--field', 'url=u'], undefined],
      [['set', 'work', 'web/gitlab.com'], 'v'],
      [['set', 'work', 'work/aws/prod'], 'v'],
      [['set', 'work', 'API_TOKEN'], 'v'],
    ] as const) {
      const r = await t.run([...args], input === undefined ? {} : { input });
      assert.is(r.code, 0, r.stderr);
    }
    assert.equal(bashComplete(t, ['get', 'work', '']), ['API_TOKEN', 'web/', 'work/']);
    assert.equal(bashComplete(t, ['get', 'work', 'we']), ['web/']);
    assert.equal(bashComplete(t, ['get', 'work', 'web/']), ['web/github.com', 'web/gitlab.com']);
    assert.equal(bashComplete(t, ['rm', 'work', 'work/']), ['work/aws/']);
    assert.equal(bashComplete(t, ['edit', 'work', 'work/aws/']), ['work/aws/prod']);
    assert.equal(bashComplete(t, ['ls', 'work', '']), ['web/', 'work/'], 'ls takes a folder');
    assert.equal(bashComplete(t, ['get', 'work', 'web/github.com', '--field', '']), ['url', 'username']);
    assert.equal(bashComplete(t, ['mv', 'work/']), ['work/API_TOKEN', 'work/web/', 'work/work/']);
    assert.equal(bashComplete(t, ['mv', 'work/web/g']), ['work/web/github.com', 'work/web/gitlab.com']);
    assert.equal(bashComplete(t, ['mv', 'work', 'web/']), ['web/github.com', 'web/gitlab.com'], 'mv C FROM TO');
    assert.ok(
      !bashComplete(t, ['history', 'work', 'web/github.com']).some((w) => w.includes('#')),
      'no PATH#FIELD key is offered',
    );
  } finally {
    await t.dispose();
  }
});

test('completing never starts an agent, prompts or prints an error', async () => {
  const t = await vaultWithEntries();
  try {
    await t.stopAgents();
    assert.equal(bashComplete(t, ['get', 'work', '']), []);
    assert.equal(bashComplete(t, ['vault', 'contact', 'show', '']), []);
    assert.equal(agentPids(t.dir), [], 'no agent was started');
    const r = shell(t, process.execPath, [stashBin, '__complete', '--', 'get', 'work', '']);
    assert.is(r.code, 0);
    assert.is(r.stdout, 'none\n');
    assert.is(r.stderr, '');
    // Without a vault there are simply no names, and still no error.
    const novault = spawnSync(process.execPath, [stashBin, '__complete', '--', 'get', ''], {
      env: { ...t.env, STASH_VAULT_DIR: join(t.home, 'none') },
      encoding: 'utf8',
    });
    assert.equal([novault.status, novault.stdout, novault.stderr], [0, 'none\n', '']);
  } finally {
    await t.dispose();
  }
});

test('contacts complete when the vault key is cached; files are left to the shell', async () => {
  const t = await vaultWithEntries();
  try {
    const { addContact, identityPublic, unlockVault, wipe } = await import('../../src/vault/index.js');
    const key = await unlockVault(t.vault, Buffer.from(t.password));
    const me = identityPublic(t.vault, key);
    addContact(t.vault, key, { name: 'carol', email: 'carol@example.test', x25519: me.x25519, ed25519: me.ed25519 });
    wipe(key);
    assert.equal(bashComplete(t, ['vault', 'contact', 'show', '']), [], 'the vault key is not cached');
    assert.is((await t.run(['vault', 'contact', 'list', '--password-file', t.pwFile])).code, 0);
    assert.equal(bashComplete(t, ['vault', 'contact', 'show', '']), ['carol']);
    assert.equal(bashComplete(t, ['container', 'share', 'work', 'c']), ['carol']);
    const files = shell(t, process.execPath, [stashBin, '__complete', '--', 'import', 'dotenv', '']);
    assert.is(files.stdout, 'files\n');
  } finally {
    await t.dispose();
  }
});

test('fish: complete -C lists containers, and entries while the container is open', async () => {
  if (!needFacility(haveCommand('fish'), 'fish', 'apt install fish')) return;
  const t = await vaultWithEntries();
  try {
    const ask = (line: string): string[] => {
      const r = shell(t, 'fish', [
        '--no-config',
        '-c',
        `stash completion fish | source; complete -C ${JSON.stringify(line)}`,
      ]);
      assert.is(r.code, 0, r.stderr);
      return r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]!);
    };
    assert.equal(ask('stash get '), ['home', 'work']);
    assert.equal(ask('stash get work '), []);
    assert.is((await t.run(['open', 'work', '--password-file', t.pwFile])).code, 0);
    assert.equal(ask('stash get work '), ['API_TOKEN', 'DB_PASSWORD']);
    assert.equal(ask('stash container rena'), ['rename']);
  } finally {
    await t.dispose();
  }
});

test('zsh: an interactive zsh lists containers and open entries on Tab', async () => {
  if (!needFacility(haveCommand('zsh'), 'zsh', 'apt install zsh')) return;
  const t = await vaultWithEntries();
  try {
    assert.is((await t.run(['open', 'work', '--password-file', t.pwFile])).code, 0);
    // A zsh driving another one on a pseudo-terminal: type, press Tab, then print a marker to know it is done.
    const driver = (line: string): string => `zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'PS1="%% "; autoload -U compinit; compinit -u -D; source <(stash completion zsh); LISTMAX=1000; print READY'
zpty -w -n z $'${line}\\t'
sleep 3
zpty -w -n z $'\\C-a\\C-k print DONE-MARK\\n'
out=""
for i in {1..200}; do
  if zpty -r -t z chunk; then out+=$chunk; else sleep 0.1; fi
  [[ $out == *DONE-MARK*DONE-MARK* ]] && break
done
zpty -d z
print -r -- "$out"`;
    const tab = (line: string): string => {
      const r = shell(t, 'zsh', ['-f', '-c', driver(line)], 60_000);
      assert.is(r.code, 0, r.stderr);
      // eslint-disable-next-line no-control-regex
      return r.stdout.replace(/\x1b\[[0-9;?]*[a-zA-Z]/g, '').replace(/\r/g, '');
    };
    const containers = tab('stash get ');
    assert.match(containers, /home +work/, containers);
    const entries = tab('stash get work ');
    assert.match(entries, /API_TOKEN +DB_PASSWORD/, entries);
    await t.run(['vault', 'sessions', 'lock', 'work']);
    const locked = tab('stash get work ');
    assert.match(locked, /DONE-MARK/, locked);
    assert.not.match(locked, /API_TOKEN|DB_PASSWORD/, locked);
  } finally {
    await t.dispose();
  }
});

test.run();
