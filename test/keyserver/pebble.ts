/**
 * Pebble, Let's Encrypt's ACME test server (Debian package `pebble`), on
 * loopback for the ACME suites, validating for real (PEBBLE_VA_ALWAYS_VALID
 * unset): its TLS-ALPN-01 checks connect to `tlsPort` of each name, and
 * pebble-challtestsrv answers its DNS queries with 127.0.0.1 for every name.
 * Its own HTTPS listener has a certificate of a test CA (written here: the
 * Debian package ships none); a server trusts it through NODE_EXTRA_CA_CERTS.
 * Certificates it issues last `validitySeconds`, so renewal can be watched.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { freePorts } from './cluster.js';
import { issueCert, makeCa } from './test-pki.js';

export interface Pebble {
  /** The ACME directory URL. */
  directory: string;
  /** PEM file of the CA of Pebble's own listener (NODE_EXTRA_CA_CERTS for a server that talks to it). */
  listenerCaPath: string;
  /** Pebble's root CA: what a client trusts to verify the certificates it issues. */
  root(): Promise<Buffer>;
  log(): string;
  stop(): Promise<void>;
}

function get(url: string, ca: Buffer): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 3000).unref();
  });
}

/** Starts challtestsrv and Pebble in `dir`; resolves once the directory answers. */
export async function startPebble(dir: string, opts: { tlsPort: number; validitySeconds: number }): Promise<Pebble> {
  const [acmePort, managementPort, httpPort, dnsPort, dnsManagementPort] = await freePorts(5);
  const ca = makeCa(dir, 'pebble listener CA');
  const listener = issueCert(ca, { names: ['127.0.0.1', 'localhost'] });
  const config = join(dir, 'pebble-config.json');
  writeFileSync(
    config,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${managementPort}`,
        certificate: listener.certPath,
        privateKey: listener.keyPath,
        httpPort,
        tlsPort: opts.tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
        certificateValidityPeriod: opts.validitySeconds,
      },
    }),
  );
  let output = '';
  const collect = (child: ChildProcess) => {
    child.stdout!.on('data', (d) => {
      output += d;
    });
    child.stderr!.on('data', (d) => {
      output += d;
    });
  };
  // Every name resolves to 127.0.0.1 (and has no AAAA record): Pebble's validations come to loopback.
  const dns = spawn(
    'pebble-challtestsrv',
    [
      '-dns01',
      `127.0.0.1:${dnsPort}`,
      '-http01',
      '',
      '-https01',
      '',
      '-tlsalpn01',
      '',
      '-management',
      `127.0.0.1:${dnsManagementPort}`,
      '-defaultIPv4',
      '127.0.0.1',
      '-defaultIPv6',
      '',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  collect(dns);
  const pebble = spawn('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${dnsPort}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
    // No artificial validation delays, no nonces refused at random, a fresh validation for every order.
    env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
  });
  collect(pebble);
  const stop = async () => {
    await Promise.all([stopChild(pebble), stopChild(dns)]);
  };
  const directory = `https://127.0.0.1:${acmePort}/dir`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const up = await get(directory, ca.pem).then(
      (r) => r.status === 200,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline || pebble.exitCode !== null) {
      await stop();
      throw new Error(`Pebble did not start: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    directory,
    listenerCaPath: ca.caPath,
    async root() {
      const r = await get(`https://127.0.0.1:${managementPort}/roots/0`, ca.pem);
      if (r.status !== 200) throw new Error(`Pebble root: HTTP ${r.status}`);
      return r.body;
    },
    log: () => output,
    stop,
  };
}
