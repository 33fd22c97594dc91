/**
 * Where the CLI parses a container name and an entry path, once: the
 * positionals of an Invocation (`[CONTAINER] PATH`, or `[CONTAINER]` for ls)
 * and, for the forms that leave the container out, the default container
 * (cli.default_container or STASH_CONTAINER, checked as the config is read).
 * The checked names (ContainerName, EntryPath) are passed down, and nothing
 * below checks them again (docs/architecture.md, "Names are parsed once").
 */
import { UsageError } from '../errors.js';
import { type EntryPath, parseEntryPath } from '../vault/entry-path.js';
import { type ContainerName, parseContainerName } from '../vault/names.js';
import type { Invocation } from './command-types.js';

/** A checked container name and entry path. */
export interface EntryTarget {
  container: ContainerName;
  path: EntryPath;
}

/**
 * `[CONTAINER] PATH`: with two positionals the first is always the container;
 * with one, it is a path in the default container (a usage error, saying how to
 * set one, when none is set).
 */
export async function entryTarget(inv: Invocation): Promise<EntryTarget> {
  const [first, second] = inv.positionals;
  if (second !== undefined) return { container: parseContainerName(first), path: parseEntryPath(second) };
  const path = parseEntryPath(first);
  return { container: await defaultContainer(inv, path), path };
}

/** `[CONTAINER]`: the container given, else the default one. */
export async function containerTarget(inv: Invocation): Promise<ContainerName> {
  const [first] = inv.positionals;
  return first !== undefined ? parseContainerName(first) : defaultContainer(inv, null);
}

/**
 * `ls [CONTAINER] [FOLDER]`: two positionals are a container and a folder; one is a
 * folder of the default container when it holds a '/' (a container name holds none),
 * else a container; none is the default container.
 */
export async function listTarget(inv: Invocation): Promise<{ container: ContainerName; folder: string | null }> {
  const [first, second] = inv.positionals;
  if (second !== undefined) return { container: parseContainerName(first), folder: second };
  if (first?.includes('/')) return { container: await defaultContainer(inv, null), folder: first };
  return { container: await containerTarget(inv), folder: null };
}

/** The default container, or a usage error naming both ways to set one and the form that needs none. */
async function defaultContainer(inv: Invocation, path: EntryPath | null): Promise<ContainerName> {
  const { loadConfig } = await import('../config/app-config.js');
  const config = await loadConfig();
  const container = config.defaultContainer.value;
  if (container !== null) return container;
  const command = `stash ${inv.command.path.join(' ')}`;
  const given = path === null ? command : `${command} ${path}`;
  throw new UsageError(
    `${given} names no container, and no default container is set: give it first (${command} CONTAINER${path === null ? '' : ` ${path}`}), ` +
      `or set one with default_container = "NAME" in the [cli] table of ${config.path}, or with STASH_CONTAINER=NAME`,
  );
}
