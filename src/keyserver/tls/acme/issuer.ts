/**
 * One ACME order (RFC 8555 section 7) over TLS-ALPN-01 (RFC 8737), through
 * acme-client: the account (its key kept in the state folder, the account
 * found again by that key), the order for every --acme-domain, each
 * authorization answered on this server's own TLS port (challenges.ts), the
 * order finalized with a CSR of a fresh ECDSA P-256 key, the chain fetched.
 *
 * Failures become one AcmeError saying which step failed and what the CA
 * said (Pebble and Let's Encrypt put the reason of a failed validation in
 * the challenge's error detail). acme-client is loaded here only, so a
 * server without --acme-domain never loads it.
 */
import { StashError } from '../../../errors.js';
import type { Logger } from '../../logger.js';
import type { TlsMaterial } from '../profile.js';
import type { AlpnChallenges } from './challenges.js';
import type { AcmeFiles } from './files.js';

/** No certificate could be obtained; main.ts exits with its own status (76). */
export class AcmeError extends StashError {
  constructor(message: string) {
    super('ACME_FAILED', message);
  }
}

export interface AcmeSettings {
  domains: string[];
  email: string | undefined;
  directory: string;
}

export interface PollSettings {
  /** First wait between polls of a pending challenge or order; doubles up to maxMs. */
  minMs: number;
  maxMs: number;
  attempts: number;
}

/** Polling as Let's Encrypt asks: not faster than once a second; a minute or so in all. */
export const DEFAULT_POLL: PollSettings = { minMs: 1000, maxMs: 10_000, attempts: 12 };

function reason(err: unknown): string {
  const e = err as { message?: string; code?: string; response?: { status?: number; data?: { detail?: string } } };
  const detail = e.response?.data?.detail;
  const text = detail ?? e.message ?? String(err);
  return e.code && !text.includes(e.code) ? `${text} (${e.code})` : text;
}

/** Runs `step`, turning a failure into an AcmeError that names it. */
async function step<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof AcmeError) throw err;
    throw new AcmeError(`${what}: ${reason(err)}`);
  }
}

type Acme = typeof import('acme-client');
type AcmeClient = InstanceType<Acme['Client']>;
type Authorization = Awaited<ReturnType<AcmeClient['getAuthorizations']>>[number];

/** The client for the stored account key (a new key saved first when there is none), its account registered or found. */
async function openAccount(acme: Acme, s: AcmeSettings, files: AcmeFiles, logger: Logger, poll: PollSettings) {
  await files.prepare();
  let accountKey = await files.accountKey();
  const known = accountKey !== undefined;
  if (!accountKey) {
    accountKey = await acme.crypto.createPrivateEcdsaKey('P-256');
    await files.saveAccountKey(accountKey);
    logger.info(`ACME: new account key in ${files.dir}`);
  }
  const client = new acme.Client({
    directoryUrl: s.directory,
    accountKey,
    backoffAttempts: poll.attempts,
    backoffMin: poll.minMs,
    backoffMax: poll.maxMs,
  });
  const contact = s.email !== undefined ? { contact: [`mailto:${s.email}`] } : {};
  // A stored key finds its account (RFC 8555 section 7.3.1, onlyReturnExisting); asking to register it again
  // would make acme-client send an empty update, which CAs refuse. A CA that lost the account gets a new registration.
  const existing =
    known &&
    (await client.createAccount({ onlyReturnExisting: true }).then(
      () => true,
      () => false,
    ));
  if (existing) {
    if (s.email !== undefined)
      await step(`updating the account's contact at ${s.directory}`, () => client.updateAccount(contact));
  } else {
    await step(`registering the account at ${s.directory}`, () =>
      client.createAccount({ termsOfServiceAgreed: true, ...contact }),
    );
  }
  return client;
}

/** Answers one pending authorization's tls-alpn-01 challenge on this server's TLS port until the CA validates it. */
async function answerAuthorization(
  acme: Acme,
  client: AcmeClient,
  authz: Authorization,
  s: AcmeSettings,
  challenges: AlpnChallenges,
): Promise<void> {
  const name = authz.identifier.value;
  if (authz.status === 'valid') return;
  // acme-client's types list http-01 and dns-01 only; its code answers any type.
  const challenge = authz.challenges.find((c) => (c.type as string) === 'tls-alpn-01');
  if (!challenge) {
    throw new AcmeError(
      `${s.directory} offers no tls-alpn-01 challenge for ${name} (only ${authz.challenges.map((c) => c.type).join(', ')}); this server answers tls-alpn-01 only`,
    );
  }
  const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
  const [alpnKey, alpnCert] = await acme.crypto.createAlpnCertificate(
    authz,
    keyAuthorization,
    await acme.crypto.createPrivateEcdsaKey('P-256'),
  );
  challenges.add(name, alpnCert, alpnKey);
  try {
    await step(`asking ${s.directory} to validate ${name}`, () => client.completeChallenge(challenge));
    await step(
      `the TLS-ALPN-01 challenge for ${name} failed (the CA connects to ${name} port 443 and must reach this server)`,
      () => client.waitForValidStatus(challenge),
    );
  } finally {
    challenges.remove(name);
  }
}

/** Obtains a certificate for `s.domains`; resolves with the chain and key (PEM) and the account URL. */
export async function orderCertificate(
  s: AcmeSettings,
  files: AcmeFiles,
  challenges: AlpnChallenges,
  logger: Logger,
  poll: PollSettings = DEFAULT_POLL,
): Promise<TlsMaterial & { accountUrl: string }> {
  const acme = await import('acme-client');
  const client = await openAccount(acme, s, files, logger, poll);
  const accountUrl = client.getAccountUrl();
  const order = await step('placing the order', () =>
    client.createOrder({ identifiers: s.domains.map((value) => ({ type: 'dns', value })) }),
  );
  const authorizations = await step('reading the authorizations', () => client.getAuthorizations(order));
  await Promise.all(authorizations.map((authz) => answerAuthorization(acme, client, authz, s, challenges)));
  const [key, csr] = await acme.crypto.createCsr(
    { commonName: s.domains[0]!, altNames: s.domains },
    await acme.crypto.createPrivateEcdsaKey('P-256'),
  );
  const finalized = await step('finalizing the order', () => client.finalizeOrder(order, csr));
  const cert = await step('downloading the certificate', () => client.getCertificate(finalized));
  return { cert, key: key.toString('latin1'), accountUrl };
}
