/**
 * Which password source a command's options and the environment choose:
 * --password-stdin, --password-file FILE, STASH_PASSWORD_FILE (in that order),
 * else a hidden prompt on the terminal. Pure and cheap, apart from password.ts
 * (which reads and prompts), so that a command served from the agent's cache
 * (`stash get` with a cached key) loads neither the prompt nor the file reader.
 */
import { UsageError } from '../errors.js';

export interface PasswordSource {
  stdin: boolean;
  file: string | null;
  /** Which option or variable named the file, for messages. */
  fileFrom: '--password-file' | 'STASH_PASSWORD_FILE' | null;
}

/** The password source chosen by a command's options and the environment. */
export function passwordSource(
  values: Record<string, string | boolean | string[] | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): PasswordSource {
  const stdin = values['password-stdin'] === true;
  const flag = typeof values['password-file'] === 'string' ? values['password-file'] : undefined;
  if (stdin && flag !== undefined)
    throw new UsageError('--password-stdin and --password-file cannot be combined; choose one');
  if (flag === '') throw new UsageError('--password-file needs a file name');
  if (stdin || flag !== undefined)
    return { stdin, file: flag ?? null, fileFrom: flag !== undefined ? '--password-file' : null };
  const fromEnv = env.STASH_PASSWORD_FILE;
  if (fromEnv) return { stdin: false, file: fromEnv, fileFrom: 'STASH_PASSWORD_FILE' };
  return { stdin: false, file: null, fileFrom: null };
}

/** True when the password comes from a script (stdin or a file), not a person. */
export function isExplicit(src: PasswordSource): boolean {
  return src.stdin || src.file !== null;
}
