/**
 * The help text, generated from the option table so every option is listed.
 */
import { optionDefs } from './options.js';

const header = `stash_key_server: the stash key sharing server

Usage:
  stash_key_server [options]                 same as run
  stash_key_server run [options]             run the server in the foreground
  stash_key_server install [--force-config]  install as a systemd service (Linux, root)
  stash_key_server uninstall [--purge-data]  remove the service (--purge-data: data, cache, logs, config)
  stash_key_server status                    unit, config, state and log status
  stash_key_server resync-peer --peer-url URL [options]
                                             stream live shares and pending verifications to a peer
  stash_key_server bench-store|bench-http|bench-http-fetch|bench-http-flow [options]
                                             benchmarks (docs/benchmarks.md)
  stash_key_server help | --help | -h        print this help

Options (flags use hyphens; in a --config file write key = value with underscores,
e.g. bind_addr = 127.0.0.1:8089; # starts a comment; flags override files):
`;

/** The full help text, ending with a newline. */
export function helpText(): string {
  const rows = optionDefs.map((d) => {
    const left = `  --${d.flag}${d.value ? ` ${d.value}` : ''}`;
    const key = d.key && d.key !== d.flag.replace(/-/g, '_') ? ` [config key: ${d.key}]` : '';
    return `${left}\n      ${d.help}${key}`;
  });
  return `${header}${rows.join('\n')}\n\nDocumentation: docs/key-server.md (operations), docs/http-api.md (HTTP API).\n`;
}
