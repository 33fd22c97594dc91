/**
 * `stash env CONTAINER [CONTAINER...] [--only P,web/] [--prefer C] -- CMD ARGS...`
 * runs CMD with the containers' entries added to its environment (run-child.ts
 * spawns it, forwards signals and registers the `env` activity), each under
 * the environment name of its path (env-names.ts; fields stay out);
 * `--format dotenv|json|shell` prints them instead (env-format.ts).
 *
 * The values must become JS strings to be passed to the child (Node has no
 * other way to build an environment); they are dropped right after the spawn.
 */
import { StashError, UsageError } from '../../errors.js';
import { type ContainerName, parseContainerName, wipeEntries } from '../../vault/index.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { readEntriesOf } from '../container-access.js';
import { entryPaths } from '../../vault/entry-path.js';
import { envNameOf, onlyOption, onlyTakes, unmatched, type OnlyFilter } from '../env-names.js';
import { fileAdvice, textUnfit, unfitError } from '../env-value.js';
import { warn } from '../output.js';
import type { Invocation } from '../command-types.js';
import { runChild } from '../run-child.js';
import { Session } from '../session.js';

/** Environment name -> the entry it comes from (its container and path) and its value. */
type Values = Map<string, { container: string; path: string; value: Buffer }>;

/**
 * The entry paths of one container that --only takes, by environment name.
 * Two paths of one container with the same name are refused, both named.
 */
function envNamesOf(container: string, keys: Iterable<string>, only: OnlyFilter | null): Map<string, string> {
  const byName = new Map<string, string>();
  for (const path of entryPaths(keys)) {
    if (!onlyTakes(only, path)) continue;
    const name = envNameOf(path);
    const other = byName.get(name);
    if (other !== undefined)
      throw new UsageError(
        `${other} and ${path} in ${container} would both be the environment variable ${name}; rename one (stash mv) or leave one out with --only`,
      );
    byName.set(name, path);
  }
  return byName;
}

/**
 * The entries of every container, one open each. A name held by two
 * containers is an error unless --prefer names the one whose value wins.
 */
async function collect(
  session: Session,
  containers: ContainerName[],
  only: OnlyFilter | null,
  prefer: string | null,
): Promise<Values> {
  const out: Values = new Map();
  const clashes = new Set<string>();
  const seen = new Set<string>();
  try {
    for (const container of containers) {
      await session.withContentKey(container, async (key, info) => {
        const entries = await readEntriesOf(session.dir, info, key);
        try {
          for (const [name, path] of envNamesOf(container, entries.keys(), only)) {
            seen.add(path);
            const held = out.get(name);
            if (held) {
              if (prefer === null) clashes.add(name);
              if (prefer !== container) continue;
              wipe(held.value);
            }
            out.set(name, { container, path, value: secureCopy(entries.get(path)!) });
          }
        } finally {
          wipeEntries(entries);
        }
      });
    }
    if (clashes.size > 0) {
      throw new UsageError(
        `${[...clashes].sort().join(', ')} ${clashes.size === 1 ? 'is' : 'are'} in more than one of ${containers.join(', ')}; say which wins with --prefer CONTAINER`,
      );
    }
    const missing = unmatched(only, seen);
    if (missing.length > 0)
      throw new StashError(
        'ENTRY_NOT_FOUND',
        `--only names ${missing.join(', ')}, which ${missing.length === 1 ? 'is' : 'are'} in none of ${containers.join(', ')}`,
      );
    return out;
  } catch (err) {
    for (const v of out.values()) wipe(v.value);
    throw err;
  }
}

/**
 * The child's environment: ours plus every entry. A value that is not UTF-8
 * would reach the child changed (env-value.ts): the run is refused before it
 * starts, naming the entry. An entry holding a NUL byte cannot be an
 * environment variable at all (C strings end there); it is left out with a
 * warning that names it, rather than refusing the whole container.
 */
function buildEnv(values: Values): NodeJS.ProcessEnv {
  for (const [name, { container, path, value }] of values) {
    // A value with a NUL byte is left out below, whatever its other bytes.
    if (!value.includes(0) && textUnfit(value) === 'not-utf8')
      throw unfitError(
        'not-utf8',
        `the value of ${path} in ${container}`,
        'an environment variable set by stash',
        `nothing was run (${fileAdvice(name, `stash://${container}/${path}`)}, and leave ${path} out here with --only)`,
      );
  }
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [name, { container, path, value }] of values) {
    if (value.includes(0)) {
      warn(
        `entry ${path} holds a NUL byte, which an environment variable cannot carry; it was left out ` +
          `(read it with \`stash get ${container} ${path}\`, or remove it with \`stash rm ${container} ${path}\`)`,
      );
      continue;
    }
    env[name] = value.toString('utf8');
  }
  return env;
}

export async function run(inv: Invocation): Promise<number> {
  const containers = inv.positionals.map(parseContainerName);
  const only = onlyOption(inv.values.only);
  const prefer = typeof inv.values.prefer === 'string' ? inv.values.prefer : null;
  if (prefer !== null && !(containers as string[]).includes(prefer))
    throw new UsageError(`--prefer ${prefer}: not one of the containers given (${containers.join(', ')})`);
  const format = inv.values.format;
  if (format !== undefined && format !== 'dotenv' && format !== 'json' && format !== 'shell') {
    throw new UsageError(`--format must be dotenv, json or shell, got ${JSON.stringify(format)}`);
  }
  if (format !== undefined && inv.rest.length > 0)
    throw new UsageError('--format prints the entries; it does not run a command (leave out -- CMD)');
  if (format === undefined && inv.rest.length === 0)
    throw new UsageError(
      'missing -- CMD: put -- before the command to run (stash env CONTAINER... -- CMD ARGS), or give --format to print the entries',
    );
  const session = new Session(inv.values);
  try {
    const values = await collect(session, containers, only, prefer);
    try {
      if (format !== undefined) {
        const { printEntries } = await import('../env-format.js');
        await printEntries(values, format);
        return 0;
      }
      const [cmd, ...args] = inv.rest as [string, ...string[]];
      return await runChild(session, cmd, args, buildEnv(values));
    } finally {
      for (const v of values.values()) wipe(v.value);
    }
  } finally {
    session.close();
  }
}
