/**
 * `stash run [--env-file FILE]... [--no-inherit] [--mask] [--file NAME=REF]... -- CMD ARGS...`:
 * runs CMD with every environment variable whose value is a secret reference
 * (`stash://CONTAINER/NAME`, from our environment and the dotenv files)
 * replaced by its value, and each --file NAME=REF written to a private file
 * whose path is passed in NAME (secret-files.ts). Every reference is resolved
 * first: an unknown one is an error before CMD starts.
 */
import { readFileSync } from 'node:fs';
import { UsageError } from '../../errors.js';
import { textUnfit, unfitError } from '../env-value.js';
import { looksLikeRef, parseRef, type SecretRef } from '../refs/reference.js';
import { type Resolved, resolveRefs, resolvedValue, wipeResolved } from '../refs/resolve.js';
import type { Invocation } from '../command-types.js';
import { runChild } from '../run-child.js';
import { Session } from '../session.js';

/** Variables a command needs to be found and to behave, kept by --no-inherit. */
const KEPT_BY_NO_INHERIT = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'TERM', 'TMPDIR', 'XDG_RUNTIME_DIR'];

function list(raw: unknown): string[] {
  if (raw === undefined) return [];
  return Array.isArray(raw) ? raw.map(String) : [String(raw)];
}

async function readEnvFile(path: string): Promise<Record<string, string>> {
  let text: Buffer;
  try {
    text = readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read --env-file ${path}: ${(err as Error).message}`);
  }
  const { parse } = await import('dotenv');
  return parse(text);
}

/** NAME=REF of --file: the variable and the reference. */
function fileOption(raw: string): { variable: string; ref: SecretRef } {
  const eq = raw.indexOf('=');
  const variable = raw.slice(0, eq);
  if (eq <= 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(variable))
    throw new UsageError(`--file ${raw}: write NAME=stash://CONTAINER/ENTRY, NAME a variable name`);
  return { variable, ref: parseRef(raw.slice(eq + 1)) };
}

export async function run(inv: Invocation): Promise<number> {
  const [cmd, ...args] = inv.rest as [string, ...string[]];
  const base: NodeJS.ProcessEnv = {};
  if (inv.values['no-inherit'] === true) {
    for (const k of KEPT_BY_NO_INHERIT) if (process.env[k] !== undefined) base[k] = process.env[k];
  } else {
    Object.assign(base, process.env);
  }
  // Later sources win: our environment, then each env file in order.
  for (const file of list(inv.values['env-file'])) Object.assign(base, await readEnvFile(file));
  const envRefs = new Map<string, SecretRef>();
  for (const [k, v] of Object.entries(base)) if (v !== undefined && looksLikeRef(v)) envRefs.set(k, parseRef(v));
  const files = list(inv.values.file).map(fileOption);
  const session = new Session(inv.values);
  try {
    const { SecretFiles } = await import('../secret-files.js');
    // The private folder first: without a tmpfs for --file, the refusal costs no password.
    const secretFiles = files.length > 0 ? SecretFiles.create(inv.values['insecure-tmp'] === true) : null;
    let values: Resolved = new Map();
    try {
      values = await resolveRefs(session, [...envRefs.values(), ...files.map((f) => f.ref)]);
      for (const [k, ref] of envRefs) {
        const value = resolvedValue(values, ref);
        // Refused, not changed: Node would turn bytes that are not UTF-8 into U+FFFD (env-value.ts).
        const unfit = textUnfit(value);
        if (unfit !== null)
          throw unfitError(
            unfit,
            `${k}=${ref.text}: the value`,
            'an environment variable set by stash',
            `nothing was run (use --file ${k}=${ref.text}, which keeps every byte)`,
          );
        base[k] = value.toString('utf8');
      }
      for (const f of files) base[f.variable] = secretFiles!.write(f.variable, resolvedValue(values, f.ref));
      const mask = inv.values.mask === true ? [...values.values()] : null;
      return await runChild(session, cmd, args, base, { mask });
    } finally {
      secretFiles?.remove();
      wipeResolved(values);
    }
  } finally {
    session.close();
  }
}
