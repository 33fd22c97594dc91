/**
 * The help text, generated from the option table so every option is listed.
 */
import { optionDefs, scopeAllows, type Command, type OptionDef } from './options.js';

const header = `stash_key_server: the stash key sharing server

Usage:
  stash_key_server [options]                 same as run
  stash_key_server run [options]             run the server in the foreground
  stash_key_server install --acme-domain NAME [--acme-email ADDR] | --tls-cert PATH --tls-key PATH [--force-config]
                                             install as a systemd service serving HTTPS on 443 (Linux, root)
  stash_key_server uninstall [--purge-data]  remove the service (--purge-data: data, cache, logs, config)
  stash_key_server status                    unit, config, state and log status
  stash_key_server resync-peer --peer-url URL [options]
                                             stream live shares and pending verifications to a peer
  stash_key_server bench-store|bench-http|bench-http-fetch|bench-http-flow [options]
                                             benchmarks (docs/benchmarks.md)
  stash_key_server help | --help | -h        print this help (COMMAND --help: that command's)
  stash_key_server --version | -V            print the version

Options (flags use hyphens; in a --config file write key = value with underscores,
e.g. bind_addr = 127.0.0.1:8089; # starts a comment; flags override files):
`;

function optionRows(defs: readonly OptionDef[]): string {
  return defs
    .map((d) => {
      const left = `  --${d.flag}${d.value ? ` ${d.value}` : ''}`;
      const key = d.key && d.key !== d.flag.replace(/-/g, '_') ? ` [config key: ${d.key}]` : '';
      return `${left}\n      ${d.help}${key}`;
    })
    .join('\n');
}

const footer = 'Documentation: docs/key-server.md (operations), docs/http-api.md (HTTP API).\n';

/** The full help text, ending with a newline. */
export function helpText(): string {
  return `${header}${optionRows(optionDefs)}\n\n${footer}`;
}

/** Usage line and summary of each command, for `stash_key_server COMMAND --help`. */
const COMMANDS: Record<Command, { usage: string; summary: string }> = {
  run: {
    usage: 'run [options]',
    summary: 'Runs the key server in the foreground (also what `stash_key_server [options]` does).',
  },
  install: {
    usage:
      'install (--acme-domain NAME [--acme-email ADDR] [--acme-directory URL] | --tls-cert PATH --tls-key PATH) [--force-config]',
    summary:
      'Installs the server as a systemd service serving HTTPS on port 443 (Linux, as root): folders, config, unit. ' +
      'It needs the certificate: over ACME for NAME, or from files; a kept config that names one needs no flag.',
  },
  uninstall: {
    usage: 'uninstall [--purge-data]',
    summary: 'Removes the systemd service; --purge-data also removes data, cache, logs and the config.',
  },
  status: {
    usage: 'status',
    summary: 'Prints the state of the installed service: unit, config, state folder and log.',
  },
  'resync-peer': {
    usage: 'resync-peer --peer-url URL [options]',
    summary: "Streams this server's live shares and pending verifications to a peer (after a peer lost its state).",
  },
  'bench-store': { usage: 'bench-store [options]', summary: 'Benchmarks the share store (docs/benchmarks.md).' },
  'bench-http': { usage: 'bench-http [options]', summary: 'Benchmarks publishing over HTTP (docs/benchmarks.md).' },
  'bench-http-fetch': {
    usage: 'bench-http-fetch [options]',
    summary: 'Benchmarks fetching over HTTP (docs/benchmarks.md).',
  },
  'bench-http-flow': {
    usage: 'bench-http-flow [options]',
    summary: 'Benchmarks the whole publish, verify, fetch flow over HTTP (docs/benchmarks.md).',
  },
};

/** The help of one command: its usage, what it does, and only the options it accepts. */
export function commandHelpText(command: Command): string {
  const { usage, summary } = COMMANDS[command];
  const defs = optionDefs.filter((d) => scopeAllows(command, d.scope));
  const inFiles = defs.some((d) => d.key !== undefined)
    ? ' (in a --config file: key = value with underscores; flags override files)'
    : '';
  const rows = [optionRows(defs), '  --help, -h\n      print this help'].filter(Boolean).join('\n');
  const options = `Options${inFiles}:\n${rows}\n`;
  return `usage: stash_key_server ${usage}\n\n${summary}\n\n${options}\n${footer}`;
}
