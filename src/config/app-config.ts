/**
 * stash's config file (TOML) and the environment overrides, resolved into
 * settings that remember where each value came from (for `stash doctor`).
 * The whole application's: the agent, the CLI and `stash doctor` read it, so
 * it lives in src/config/, below all three (docs/architecture.md).
 *
 * File: STASH_AGENT_CONFIG, else STASH_CONFIG, else the platform default.
 * Keys: [agent] prevent_sleep (alias suspend_inhibit), terminate_on_suspend, lock_on_screen_lock;
 * [cli] clip_seconds (the clipboard clear of `get --clip`), default_container (of a one-argument `get PATH`); [vault] history_keep (previous values kept per entry); top-level key_server_url (checked by server-url.ts, the rule
 * --server follows too). Unknown keys and wrong types are errors naming the
 * file, the line, the key and what was expected. The agent's environment-only
 * settings are src/agent/config.ts's.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, errorMessage } from '../errors.js';
import { type ConfigPathSource, configPath } from './config-path.js';
import { checkKeyServerUrl } from './server-url.js';
import { DEFAULT_HISTORY_KEEP, MAX_HISTORY_KEEP } from '../vault/history-block.js';
import { type ContainerName, parseContainerName } from '../vault/names.js';

export { configPath } from './config-path.js';

export type SettingSource = 'default' | 'file' | 'environment';

export interface Setting<T> {
  value: T;
  source: SettingSource;
  /** The file key or environment variable that set it. */
  from: string | null;
}

export interface StashConfig {
  path: string;
  pathSource: ConfigPathSource;
  fileFound: boolean;
  preventSleep: Setting<boolean>;
  terminateOnSuspend: Setting<boolean>;
  /** Wipe every cached key when the session locks, and cache none while it is locked (agent.lock_on_screen_lock). */
  lockOnScreenLock: Setting<boolean>;
  keyServerUrl: Setting<string | null>;
  /** Seconds before `get --clip` clears the clipboard (cli.clip_seconds, STASH_CLIP_SECONDS). */
  clipSeconds: Setting<number>;
  /** Previous values a write keeps per entry (vault.history_keep, STASH_HISTORY_KEEP); 0 keeps none. */
  historyKeep: Setting<number>;
  /** The container of a one-argument `stash get PATH` and the like (cli.default_container, STASH_CONTAINER); null: none. */
  defaultContainer: Setting<ContainerName | null>;
}

/** Default and largest clipboard clear delay (seconds): pass and gopass clear after 45 s; a day at most. */
export const DEFAULT_CLIP_SECONDS = 45;
export const MAX_CLIP_SECONDS = 86_400;

const AGENT_KEYS = ['prevent_sleep', 'suspend_inhibit', 'terminate_on_suspend', 'lock_on_screen_lock'] as const;
const CLI_KEYS = ['clip_seconds', 'default_container'] as const;
const VAULT_KEYS = ['history_keep'] as const;
const TOP_KEYS = ['agent', 'cli', 'vault', 'key_server_url'] as const;

/** Parses a boolean environment value; anything else is an error naming the variable. */
export function envBoolean(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false (also 1/0, yes/no, on/off), got ${JSON.stringify(raw)}`);
}

async function parseToml(path: string, text: string): Promise<Record<string, unknown>> {
  const { parse } = await import('smol-toml');
  try {
    return parse(text) as Record<string, unknown>;
  } catch (err) {
    // smol-toml's TomlError has the position; its message adds a code excerpt we leave out.
    const line = (err as { line?: unknown }).line;
    const where = typeof line === 'number' ? `${path}:${line}` : path;
    const why = errorMessage(err)
      .split('\n')[0]!
      .replace(/^Invalid TOML document: /, '');
    const assignment =
      typeof line === 'number'
        ? /^\s*([A-Za-z0-9_.-]+)\s*=\s*(.*?)\s*$/.exec(text.split(/\r?\n/)[line - 1] ?? '')
        : null;
    if (assignment && /invalid value|unexpected|expected/i.test(why)) {
      const key = assignment[1]!.split('.').pop()!;
      const value = assignment[2]!.slice(0, 60);
      throw new ConfigError(
        `${where}: ${assignment[1]}: ${JSON.stringify(value)} is not a TOML value; ${expectedValue(key)}`,
      );
    }
    throw new ConfigError(`${where}: not valid TOML: ${why}`);
  }
}

/** What a key of the config file takes, said the way a TOML file must write it. */
function expectedValue(key: string): string {
  if ((AGENT_KEYS as readonly string[]).includes(key)) return `${key} takes a boolean: true or false, unquoted`;
  if (key === 'clip_seconds')
    return `clip_seconds takes a whole number of seconds from 1 to ${MAX_CLIP_SECONDS}, unquoted`;
  if (key === 'history_keep') return `history_keep takes a whole number from 0 to ${MAX_HISTORY_KEEP}, unquoted`;
  if (key === 'default_container') return 'default_container takes a container name in quotes, e.g. "personal"';
  if (key === 'key_server_url') return 'key_server_url takes a string in quotes, e.g. "https://keys.example.org"';
  return 'a boolean is true or false (unquoted), a string is written in quotes';
}

/**
 * The 1-based line where `key` is set, in `[table]` (null: at the top level),
 * for error messages; null when it cannot be found. TOML allows the same key
 * to be written several ways (`[agent]` then `k = v`, `agent.k = v`, an inline
 * table); this recognises those forms, which is all an error message needs.
 */
export function keyLine(text: string, table: string | null, key: string): number | null {
  const bare = (k: string): string => k.trim().replace(/^"(.*)"$/, '$1');
  const lines = text.split(/\r?\n/);
  let current: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/^\s+/, '');
    const header = /^\[\[?([^\]]+)\]/.exec(line);
    if (header) {
      current = header[1]!.split('.').map(bare).join('.');
      // A table named like the key (`[agnet]` for an unknown top-level key "agnet").
      if (table === null && current.split('.')[0] === key) return i + 1;
      continue;
    }
    const assign = /^([A-Za-z0-9_\-."' ]+?)\s*=/.exec(line);
    if (!assign) continue;
    const path = [...(current ? current.split('.') : []), ...assign[1]!.split('.').map(bare)];
    const want = table === null ? [key] : [table, key];
    if (want.every((w, j) => path[j] === w)) return i + 1;
    // An inline table: `agent = { prevent_sleep = 1 }`.
    if (table !== null && path.length === 1 && path[0] === table && line.includes(key)) return i + 1;
  }
  return null;
}

function fileBoolean(where: string, key: string, value: unknown): boolean {
  if (typeof value !== 'boolean')
    throw new ConfigError(`${where}: ${key} must be a boolean (true or false), got ${JSON.stringify(value)}`);
  return value;
}

/**
 * A whole number from `min` to `max` (`fromText`: an environment variable's
 * text), else a ConfigError: "`what` must be a whole number `range`, got ...".
 */
function wholeNumber(what: string, value: unknown, fromText: boolean, min: number, max: number, range: string): number {
  // The variable is text; the file has a number type, and "45" in quotes is a string there.
  const n = fromText && typeof value === 'string' && /^\s*[0-9]+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(
      // String(): JSON would print TOML's nan and inf as null.
      `${what} must be a whole number ${range}, got ${typeof value === 'number' ? String(value) : JSON.stringify(typeof value === 'string' ? value.slice(0, 100) : value)}`,
    );
  }
  return n;
}

/** A clipboard clear delay: a whole number of seconds from 1 to MAX_CLIP_SECONDS. */
const clipSecondsValue = (what: string, value: unknown, fromText: boolean): number =>
  wholeNumber(what, value, fromText, 1, MAX_CLIP_SECONDS, `of seconds from 1 to ${MAX_CLIP_SECONDS}`);

/** Previous values kept per entry: a whole number from 0 to MAX_HISTORY_KEEP. */
const historyKeepValue = (what: string, value: unknown, fromText: boolean): number =>
  wholeNumber(
    what,
    value,
    fromText,
    0,
    MAX_HISTORY_KEEP,
    `of previous values from 0 (keep none) to ${MAX_HISTORY_KEEP}`,
  );

/** The default container: a container name (names.ts), else a ConfigError saying `what` set it and why it is no name. */
function defaultContainerValue(what: string, value: unknown): ContainerName {
  if (typeof value !== 'string')
    throw new ConfigError(`${what} must be a container name in quotes, got ${JSON.stringify(value)}`);
  try {
    return parseContainerName(value);
  } catch (err) {
    throw new ConfigError(`${what}: ${errorMessage(err)}`);
  }
}

/** `doc[name]`, a table whose keys are all `known` (undefined when absent); else a ConfigError at its line. */
function knownTable(
  doc: Record<string, unknown>,
  name: string,
  known: readonly string[],
  at: (table: string | null, key: string) => string,
): Record<string, unknown> | undefined {
  const value = doc[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfigError(`${at(null, name)}: ${name} must be a table ([${name}])`);
  const table = value as Record<string, unknown>;
  for (const key of Object.keys(table)) {
    if (!known.includes(key))
      throw new ConfigError(
        `${at(name, key)}: unknown key "${name}.${key}"; known keys: ${known.map((k) => `${name}.${k}`).join(', ')}`,
      );
  }
  return table;
}

/** What loadConfig reads. */
export interface LoadOptions {
  /**
   * False when the command names its key server itself (`--server`): then key_server_url and
   * STASH_KEY_SERVER_URL are not read, so a bad one cannot stop it (the option wins unread).
   */
  keyServerUrl?: boolean;
}

type At = (table: string | null, key: string) => string;

/** The config file's text, or null when the default file is absent (a file named explicitly must exist). */
function readConfigText(path: string, source: StashConfig['pathSource']): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A missing default file is normal; a missing file someone named explicitly is an error.
    if (code !== 'ENOENT' || source !== 'default')
      throw new ConfigError(`cannot read config file ${path} (from ${source}): ${errorMessage(err)}`);
    return null;
  }
}

const def = <T>(value: T): Setting<T> => ({ value, source: 'default', from: null });
const fromFile = <T>(value: T, key: string): Setting<T> => ({ value, source: 'file', from: key });
const fromEnv = <T>(value: T, name: string): Setting<T> => ({ value, source: 'environment', from: name });

/** This process's loads from process.env, by whether key_server_url is read: a command loads once. */
const loaded = new Map<boolean, Promise<StashConfig>>();

/**
 * Loads the config file (if any) and applies environment overrides. From
 * process.env (the default) the result is kept: one command may ask several
 * times (its own settings, the agent's checks before it talks to one), and the
 * file is read, and each value checked, once.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, opts: LoadOptions = {}): Promise<StashConfig> {
  if (env !== process.env) return readConfig(env, opts);
  const key = opts.keyServerUrl !== false;
  let config = loaded.get(key);
  if (config === undefined) {
    config = readConfig(env, opts);
    loaded.set(key, config);
  }
  return config;
}

async function readConfig(env: NodeJS.ProcessEnv, opts: LoadOptions): Promise<StashConfig> {
  const { path, source } = configPath(env);
  const text = readConfigText(path, source);
  const config: StashConfig = {
    path,
    pathSource: source,
    fileFound: text !== null,
    preventSleep: def(true),
    terminateOnSuspend: def(true),
    lockOnScreenLock: def(true),
    keyServerUrl: def<string | null>(null),
    clipSeconds: def(DEFAULT_CLIP_SECONDS),
    historyKeep: def(DEFAULT_HISTORY_KEEP),
    defaultContainer: def<ContainerName | null>(null),
  };
  if (text !== null) {
    const doc = await parseToml(path, text);
    // "file:line" of a key, for every error below (a person fixes a line, not a key path).
    const at: At = (table, key) => {
      const line = keyLine(text, table, key);
      return line === null ? path : `${path}:${line}`;
    };
    applyFile(config, doc, at, opts);
  }
  applyEnvironment(config, env, opts);
  return config;
}

/** The file's settings over the defaults; unknown keys and wrong types are errors at their line. */
function applyFile(config: StashConfig, doc: Record<string, unknown>, at: At, opts: LoadOptions): void {
  for (const key of Object.keys(doc)) {
    if (!(TOP_KEYS as readonly string[]).includes(key))
      throw new ConfigError(`${at(null, key)}: unknown key ${JSON.stringify(key)}; known keys: ${TOP_KEYS.join(', ')}`);
  }
  if (doc.key_server_url !== undefined && opts.keyServerUrl !== false) {
    const url = doc.key_server_url;
    const what = `${at(null, 'key_server_url')}: key_server_url`;
    if (typeof url !== 'string')
      throw new ConfigError(`${what} must be a string holding an https:// URL, got ${JSON.stringify(url)}`);
    config.keyServerUrl = fromFile(
      checkKeyServerUrl(url, what, (m) => new ConfigError(m)),
      'key_server_url',
    );
  }
  const cli = knownTable(doc, 'cli', CLI_KEYS, at);
  if (cli?.clip_seconds !== undefined) {
    const what = `${at('cli', 'clip_seconds')}: cli.clip_seconds`;
    config.clipSeconds = fromFile(clipSecondsValue(what, cli.clip_seconds, false), 'cli.clip_seconds');
  }
  if (cli?.default_container !== undefined) {
    const what = `${at('cli', 'default_container')}: cli.default_container`;
    config.defaultContainer = fromFile(defaultContainerValue(what, cli.default_container), 'cli.default_container');
  }
  const vault = knownTable(doc, 'vault', VAULT_KEYS, at);
  if (vault?.history_keep !== undefined) {
    const what = `${at('vault', 'history_keep')}: vault.history_keep`;
    config.historyKeep = fromFile(historyKeepValue(what, vault.history_keep, false), 'vault.history_keep');
  }
  const agent = knownTable(doc, 'agent', AGENT_KEYS, at);
  if (agent !== undefined) applyAgentTable(config, agent, at);
}

/** The [agent] table: prevent_sleep (or its alias suspend_inhibit, which must agree), terminate_on_suspend, lock_on_screen_lock. */
function applyAgentTable(config: StashConfig, agent: Record<string, unknown>, at: At): void {
  const prevent = agent.prevent_sleep;
  const alias = agent.suspend_inhibit;
  if (prevent !== undefined && alias !== undefined && prevent !== alias) {
    throw new ConfigError(
      `${at('agent', 'suspend_inhibit')}: agent.prevent_sleep and its alias agent.suspend_inhibit disagree; keep one`,
    );
  }
  const flag = (key: string): Setting<boolean> =>
    fromFile(fileBoolean(at('agent', key), `agent.${key}`, agent[key]), `agent.${key}`);
  if (prevent !== undefined) config.preventSleep = flag('prevent_sleep');
  else if (alias !== undefined) config.preventSleep = flag('suspend_inhibit');
  if (agent.terminate_on_suspend !== undefined) config.terminateOnSuspend = flag('terminate_on_suspend');
  if (agent.lock_on_screen_lock !== undefined) config.lockOnScreenLock = flag('lock_on_screen_lock');
}

/** The environment's overrides; an empty variable counts as unset. */
function applyEnvironment(config: StashConfig, env: NodeJS.ProcessEnv, opts: LoadOptions): void {
  const set = (name: string): string | undefined =>
    env[name] === undefined || env[name] === '' ? undefined : env[name];
  const flag = (name: string): Setting<boolean> => fromEnv(envBoolean(name, set(name)!), name);
  if (set('STASH_AGENT_PREVENT_SLEEP')) config.preventSleep = flag('STASH_AGENT_PREVENT_SLEEP');
  if (set('STASH_AGENT_TERMINATE_ON_SUSPEND')) config.terminateOnSuspend = flag('STASH_AGENT_TERMINATE_ON_SUSPEND');
  if (set('STASH_AGENT_LOCK_ON_SCREEN_LOCK')) config.lockOnScreenLock = flag('STASH_AGENT_LOCK_ON_SCREEN_LOCK');
  const clip = set('STASH_CLIP_SECONDS');
  if (clip) config.clipSeconds = fromEnv(clipSecondsValue('STASH_CLIP_SECONDS', clip, true), 'STASH_CLIP_SECONDS');
  const keep = set('STASH_HISTORY_KEEP');
  if (keep) config.historyKeep = fromEnv(historyKeepValue('STASH_HISTORY_KEEP', keep, true), 'STASH_HISTORY_KEEP');
  const container = set('STASH_CONTAINER');
  if (container)
    config.defaultContainer = fromEnv(defaultContainerValue('STASH_CONTAINER', container), 'STASH_CONTAINER');
  const url = set('STASH_KEY_SERVER_URL');
  if (url && opts.keyServerUrl !== false) {
    const checked = checkKeyServerUrl(url, 'STASH_KEY_SERVER_URL', (m) => new ConfigError(m));
    config.keyServerUrl = fromEnv(checked, 'STASH_KEY_SERVER_URL');
  }
}
