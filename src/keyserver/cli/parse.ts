/**
 * The hand-written, strict command-line parser of `stash_key_server`.
 * Config files (`--config`, repeatable, read first, later files win) hold
 * `key = value` lines; flags given on the command line override them. Every
 * error names the option (and file:line for config files).
 */
import { readFileSync } from 'node:fs';
import { UsageError } from '../../errors.js';
import { parseConfigText, type RawSetting } from './config-file.js';
import { parseReplicationToken } from './values.js';
import { commandNames, defaultConfig, optionByFlag, scopeAllows, type Command, type OptionDef } from './options.js';
import type { ServerConfig } from '../server-config.js';

export type Invocation =
  /** topic: the command whose help was asked for (`run --help`, `help run`); none for the general help. */
  | { command: 'help'; topic?: Command }
  /** warnings: said once at start (main.ts logs them), never on a reload. */
  | { command: Command; config: ServerConfig; configFiles: string[]; warnings: string[] };

/** Reads a config file; injectable for tests. */
export type FileReader = (path: string) => string;

const helpWords = new Set(['help', '--help', '-h']);

/**
 * Parses argv (without node and script). Throws UsageError on any mistake.
 */
export function parseCommandLine(argv: string[], readFile: FileReader = (p) => readFileSync(p, 'utf8')): Invocation {
  const first = argv[0];
  let command: Command;
  let rest: string[];
  if (first === undefined) {
    command = 'run';
    rest = [];
  } else if (helpWords.has(first)) {
    if (argv.length > 1 && first !== 'help') throw new UsageError(`unexpected argument after ${first}: ${argv[1]}`);
    const topic = argv[1];
    if (topic === undefined) return { command: 'help' };
    if (!(commandNames as readonly string[]).includes(topic))
      throw new UsageError(`unknown command '${topic}' (see stash_key_server --help)`);
    if (argv.length > 2) throw new UsageError(`unexpected argument after help ${topic}: ${argv[2]}`);
    return { command: 'help', topic: topic as Command };
  } else if ((commandNames as readonly string[]).includes(first)) {
    command = first as Command;
    rest = argv.slice(1);
  } else if (first.startsWith('--')) {
    command = 'run';
    rest = argv;
  } else {
    throw new UsageError(
      `unknown command '${first}' (commands: ${commandNames.join(', ')}, help; see stash_key_server --help)`,
    );
  }
  if (rest.includes('--help') || rest.includes('-h'))
    return first === undefined || first.startsWith('--') ? { command: 'help' } : { command: 'help', topic: command };

  const flags = readFlags(command, rest);
  const configFiles = flags.filter((s) => s.def.flag === 'config').map((s) => s.raw);
  const fromFiles: RawSetting[] = [];
  for (const path of configFiles) {
    let text: string;
    try {
      text = readFile(path);
    } catch (err) {
      const code =
        typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : 'error';
      throw new UsageError(`--config ${path}: cannot read the file (${code})`);
    }
    fromFiles.push(...parseConfigText(text, path));
  }

  const config = defaultConfig();
  for (const s of [...fromFiles, ...flags]) {
    if (s.def.flag !== 'config') s.def.apply(config, s.raw, s.where);
  }
  crossCheck(command, config);
  if (config.replicationTokenFile !== undefined)
    config.replicationToken = readTokenFile(config.replicationTokenFile, readFile);
  const warnings: string[] = [];
  if (flags.some((s) => s.def.flag === 'replication-token')) warnings.push(TOKEN_FLAG_WARNING);
  return { command, config, configFiles, warnings };
}

/**
 * A process's command line is readable by every local user (ps,
 * /proc/PID/cmdline), and the replication token is the cluster's one secret:
 * whoever reads it can sign batches that every node applies.
 */
export const TOKEN_FLAG_WARNING =
  '--replication-token on the command line can be read by every user of this machine (ps, /proc/PID/cmdline); ' +
  "put the token in a file only this server's user can read and give --replication-token-file PATH, " +
  'or set replication_token in a --config file only it can read';

function readFlags(command: Command, args: string[]): RawSetting[] {
  const out: RawSetting[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith('--') || arg === '--') {
      throw new UsageError(`unexpected argument: ${JSON.stringify(arg)} (options start with --)`);
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const def: OptionDef | undefined = optionByFlag.get(name);
    if (!def) throw new UsageError(`unknown option: --${name} (see stash_key_server --help)`);
    if (!scopeAllows(command, def.scope)) throw new UsageError(`option --${name} is not accepted by \`${command}\``);
    let raw: string;
    if (def.value === undefined) {
      if (eq >= 0) throw new UsageError(`option --${name} takes no value`);
      raw = 'true';
    } else if (eq >= 0) {
      raw = arg.slice(eq + 1);
    } else {
      const next = args[i + 1];
      if (next === undefined || next.startsWith('--'))
        throw new UsageError(`option --${name} needs a value (${def.value})`);
      raw = next;
      i++;
    }
    if (!def.repeatable && seen.has(name)) throw new UsageError(`option --${name} is given twice`);
    seen.add(name);
    out.push({ def, raw, where: `--${name}` });
  }
  return out;
}

/** The token from --replication-token-file: its first line, checked like --replication-token. */
function readTokenFile(path: string, readFile: FileReader): string {
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    const code =
      typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : 'error';
    throw new UsageError(`--replication-token-file ${path}: cannot read the file (${code})`);
  }
  return parseReplicationToken(text.split('\n')[0]!, `--replication-token-file ${path}`);
}

/** Rules that involve more than one option. */
function crossCheck(command: Command, c: ServerConfig): void {
  if ((c.tlsCert === undefined) !== (c.tlsKey === undefined)) {
    throw new UsageError('--tls-cert and --tls-key must be given together (or neither, for plain HTTP)');
  }
  if (c.acmeDomains.length > 0 && c.tlsCert !== undefined) {
    throw new UsageError(
      'give --acme-domain (certificates obtained over ACME) or --tls-cert/--tls-key (certificate files), not both',
    );
  }
  if (c.acmeDomains.length === 0 && (c.acmeEmail !== undefined || c.acmeDirectory !== undefined)) {
    throw new UsageError(
      `--acme-${c.acmeEmail !== undefined ? 'email' : 'directory'} needs --acme-domain NAME: the names to obtain a certificate for`,
    );
  }
  if (c.replicationToken !== undefined && c.replicationTokenFile !== undefined) {
    throw new UsageError(
      'give --replication-token or --replication-token-file, not both (the installed service passes the file: remove replication_token from the config)',
    );
  }
  if (command === 'resync-peer' && c.peerUrl === undefined) {
    throw new UsageError("resync-peer needs --peer-url URL (the peer's /v1/replicate URL)");
  }
  if (c.topologyServers.length > 0) {
    const ids = new Set(c.topologyServers.map((s) => s.id));
    for (const r of c.routes) {
      for (const id of [r.owner, r.primary, ...r.failovers]) {
        if (!ids.has(id)) {
          throw new UsageError(
            `--route ${r.owner}=${[r.primary, ...r.failovers].join(',')}: server ${id} is not a --topology-server entry`,
          );
        }
      }
    }
  }
}
