/**
 * The systemd unit and the default config file that `install` writes.
 *
 * Hardening: a DynamicUser (no account to manage; systemd creates the
 * state, cache and log folders for it), the whole file system read-only but
 * those three folders (ProtectSystem=strict + StateDirectory= etc.), no new
 * privileges, CAP_NET_BIND_SERVICE and nothing else (port 443 as a non-root
 * user), a system-call allow-list, only IPv4/IPv6/Unix sockets.
 * The replication token is not in the (world-readable) config: it is a
 * root-only file that systemd hands over with LoadCredential=.
 * MemoryDenyWriteExecute stays off: V8's JIT needs writable+executable pages
 * and Node aborts at start-up without them.
 *
 * Processes: `--processes auto`, one process today (run.ts AUTO_PROCESSES:
 * two do not fit in 100 MB); KillMode stays control-group, so with
 * `--processes 2` a stop signals both and a restart starts both.
 *
 * Port 443: the config install writes binds 0.0.0.0:443 and names the
 * certificate (install/certificate-source.ts): ACME, which the service
 * runs itself, or files that systemd hands over (LoadCredential=, so the
 * key may stay root-only) and ExecStart= names in the credentials folder.
 * A start that ends because ACME gave no certificate (exit 76) is not
 * retried every 2 s: Let's Encrypt allows 5 failed validations an hour.
 *
 * Memory: node runs with a small young generation and a capped old one, and
 * glibc's allocator is told to hand freed memory back (docs/operations.md,
 * "Memory"; bench/keyserver-rss-process.js measures the service run so). The node
 * flags go in NODE_OPTIONS, not on ExecStart: a single executable hands
 * every argument after its name to our own option parser, which refuses
 * them; node reads NODE_OPTIONS either way, and the fetch processes inherit it.
 */
import { realPaths } from './paths.js';
import type { CertificateSource } from './certificate-source.js';

export type UnitInputs =
  /** The npm package: node runs bin/stash_key_server.js (absolute paths). */
  | { node: string; script: string }
  /** The single executable, installed as a file of its own (absolute path). */
  | { executable: string };

/** Node flags of the installed service: young generation 2 x 1 MB, old generation capped at 64 MB. */
export const MEMORY_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1', '--max-old-space-size=64'];
/** glibc allocator settings of the installed service: two arenas, buffers >= 64 KiB mapped apart, freed memory trimmed. */
export const MEMORY_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '65536',
  MALLOC_TRIM_THRESHOLD_: '65536',
};

/** The environment of the installed service: the node flags (NODE_OPTIONS) and the allocator settings. */
export const UNIT_ENVIRONMENT: Readonly<Record<string, string>> = {
  NODE_OPTIONS: MEMORY_NODE_FLAGS.join(' '),
  ...MEMORY_ENV,
};

/** How many processes the installed service serves from (run --processes). */
export const UNIT_PROCESSES: readonly string[] = ['--processes', 'auto'];

/** Quotes an ExecStart argument when it needs it (systemd's own quoting rules). */
function execArg(arg: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `"${arg.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** An Environment= assignment, quoted as a whole when its value holds a space. */
function envAssignment(name: string, value: string): string {
  const kv = `${name}=${value}`;
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(kv) ? kv : `"${kv.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/**
 * The [Service] lines that confine the server: only the capability to bind a low port, a read-only
 * system, no devices, no kernel knobs, the system calls of an ordinary service, fixed resource limits.
 */
function sandboxLines(underHome: boolean): string {
  return `AmbientCapabilities=CAP_NET_BIND_SERVICE
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=${underHome ? 'read-only' : 'yes'}
PrivateTmp=yes
PrivateDevices=yes
PrivateMounts=yes
DevicePolicy=closed
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
ProcSubset=pid
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
KeyringMode=private
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @obsolete
SystemCallErrorNumber=EPERM
LimitNOFILE=65536
TasksMax=256
MemoryMax=512M
`;
}

/** `tls`: certificate files for LoadCredential= (install/certificate-source.ts), absolute paths. */
export function unitText(u: UnitInputs, tls?: { cert: string; key: string }): string {
  const files = 'executable' in u ? [u.executable] : [u.node, u.script];
  const command = files.map(execArg).join(' ');
  // ProtectHome=yes would hide a package installed under a home folder (npm -g with a user prefix).
  const underHome = files.some((f) => /^\/(home|root|run\/user)\//.test(f));
  return `# Installed by \`stash_key_server install\`. \`stash_key_server uninstall\` removes it.
[Unit]
Description=stash key sharing server
Documentation=https://github.com/stash/stash/blob/main/docs/operations.md
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
# --processes auto: as many processes as fit the memory target, one today; --processes 2 adds a fetch process (docs/benchmarks.md, "Memory of the installed service").
# --log-file: the server writes and rotates server.log itself, within its disk cap (docs/operations.md, "Disk").
ExecStart=${command} run ${UNIT_PROCESSES.join(' ')} --config ${realPaths.config} --log-file ${realPaths.log} --replication-token-file %d/replication-token${tls ? ' --tls-cert %d/tls-cert --tls-key %d/tls-key' : ''}
# The token file stays root-only (0600); systemd copies it where only this service can read it.
# systemctl reload: the server reads its config again and applies what can change live (docs/operations.md).
ExecReload=/bin/kill -HUP $MAINPID
LoadCredential=replication-token:${realPaths.token}
${
  tls
    ? `# The certificate files too: the key stays root-only; a renewal needs a restart (credentials are copied at start).
LoadCredential=tls-cert:${tls.cert}
LoadCredential=tls-key:${tls.key}
`
    : ''
}# Node flags only through NODE_OPTIONS: the single executable takes every argument as its own.
Environment=${Object.entries(UNIT_ENVIRONMENT)
    .map(([k, v]) => envAssignment(k, v))
    .join(' ')}
Restart=on-failure
RestartSec=2
# Exit 76: no certificate over ACME. The log says why; retrying in a loop would only spend the CA's failure limits.
RestartPreventExitStatus=76
TimeoutStopSec=10
KillSignal=SIGTERM

DynamicUser=yes
StateDirectory=stash-key-server
StateDirectoryMode=0700
CacheDirectory=stash-key-server
CacheDirectoryMode=0700
LogsDirectory=stash-key-server
LogsDirectoryMode=0750
# stdout (the "listening on" line) and what node prints before the log is open go to the journal.
UMask=0077

${sandboxLines(underHome)}
[Install]
WantedBy=multi-user.target
`;
}

const quoted = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

/** The certificate lines of the config: what install was given. */
function certificateLines(source: CertificateSource | undefined): string {
  if (source?.kind === 'acme') {
    return [
      '# The certificate: obtained over ACME (TLS-ALPN-01 on port 443, no port 80) and renewed by the service itself;',
      '# account and certificates in the state folder. The names must resolve to this machine.',
      `acme_domain = [${source.domains.map(quoted).join(', ')}]`,
      source.email !== undefined ? `acme_email = ${quoted(source.email)}` : '# acme_email = "ops@example.org"',
      source.directory !== undefined
        ? `acme_directory = ${quoted(source.directory)}`
        : '# acme_directory = "https://acme-staging-v02.api.letsencrypt.org/directory"',
    ].join('\n');
  }
  if (source?.kind === 'files') {
    return [
      '# The certificate files: the unit hands them to the service (LoadCredential=) and names its copies on',
      '# ExecStart=; run install again (with --force-config) to use other files. After renewing them, restart the service.',
      `tls_cert = ${quoted(source.cert)}`,
      `tls_key = ${quoted(source.key)}`,
    ].join('\n');
  }
  return '# acme_domain = ["keys.example.org"]   (or tls_cert / tls_key; install asks for one of them)';
}

/** The config written at install time (kept on later installs unless --force-config). */
export function defaultConfigText(source?: CertificateSource): string {
  return `# /etc/stash/key-server.toml: configuration of stash_key_server (docs/key-server.md lists every key).
# Written by \`stash_key_server install\`; kept on reinstall unless --force-config is given.
# Keys use underscores; flags on the ExecStart line of the unit would override them.

# HTTPS on port 443 (the unit grants the port-binding capability and nothing more).
# Behind a reverse proxy that terminates TLS instead: bind to loopback, drop the certificate and set public_url and trust_proxy.
bind_addr = "0.0.0.0:443"
state_dir = "${realPaths.state}"
server_id = 0
cluster_id = "default"
# public_url = "https://keys.example.org"   (default: https:// and the first acme_domain)
# trust_proxy = true
${certificateLines(source)}

# Verification mail: run as <command> <email> <url>.
# verification_email_command = "/usr/local/lib/stash/send-verification"

# A two-node cluster (docs/operations.md): same cluster_id, token, topology and routes on both nodes.
# topology_server = ["0=https://keys-a.example.org,active", "1=https://keys-b.example.org,standby"]
# route = ["0=0,1", "1=1,0"]
# The replication token is not set here: it lives in /etc/stash/replication-token (root only, generated by
# install; copy the same file to every node of the cluster), and the unit passes it with --replication-token-file.
# replication_peer_url = "https://keys-b.example.org/v1/replicate"
`;
}
