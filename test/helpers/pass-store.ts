/**
 * A real password store for the `stash import pass` suites: a throwaway GnuPG
 * home with one unprotected key made by gpg, and a store made by pass itself
 * (`pass init`; entries with `insert`), so the import decrypts what pass wrote.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { haveCommand, needFacility } from './facility.js';

export interface PassStore {
  /** The temporary folder holding the GnuPG home and the store. */
  home: string;
  /** GNUPGHOME and PASSWORD_STORE_DIR for gpg and pass. */
  env: NodeJS.ProcessEnv;
  store: string;
  /** `pass insert -m PATH` with `body` (its lines, as pass keeps them). */
  insert(path: string, body: string): void;
  cleanup(): void;
}

/** Runs `cmd` to the end; its stdout, or an Error with its stderr. */
export function sh(cmd: string, args: string[], env: NodeJS.ProcessEnv, input = ''): string {
  const r = spawnSync(cmd, args, { env, input, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** True when gpg and pass can run (else the test is skipped with the reason, or fails under CI). */
export function passReady(): boolean {
  return needFacility(
    haveCommand('gpg') && haveCommand('pass') && haveCommand('gpgconf'),
    'gnupg and pass',
    'apt install gnupg pass',
  );
}

/** A GnuPG home (short path: gpg-agent's socket lives in it) with one unprotected key, and a pass store for it. */
export function makeStore(): PassStore {
  const home = mkdtempSync(join(tmpdir(), 'sg-'));
  const gnupg = join(home, 'g');
  mkdirSync(gnupg, { mode: 0o700 });
  const store = join(home, 'store');
  const env = { ...process.env, GNUPGHOME: gnupg, PASSWORD_STORE_DIR: store, PASSWORD_STORE_GENERATED_LENGTH: '20' };
  sh(
    'gpg',
    [
      '--batch',
      '--pinentry-mode',
      'loopback',
      '--passphrase',
      '',
      '--quick-gen-key',
      'Stash Test <stash-test@example.invalid>',
      'future-default',
      'default',
      'never',
    ],
    env,
  );
  sh('pass', ['init', 'stash-test@example.invalid'], env);
  return {
    home,
    env,
    store,
    insert(path, body) {
      sh('pass', ['insert', '-m', path], env, body);
    },
    cleanup() {
      spawnSync('gpgconf', ['--kill', 'gpg-agent'], { env });
      rmSync(home, { recursive: true, force: true });
    },
  };
}
