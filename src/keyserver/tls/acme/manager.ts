/**
 * The certificates of a server started with --acme-domain, kept as Caddy
 * keeps them: the one in the state folder is used while it covers every
 * name and has not expired; otherwise one is obtained before the server
 * serves (a failure stops the start with AcmeError and a clear line). It is
 * renewed when a third of its lifetime is left (Caddy's and Let's Encrypt's
 * advice), in the background, without a restart: `onRenewed` puts the new
 * one into every listener. A failed renewal is logged with what is left and
 * tried again, sooner as the expiry nears.
 */
import { X509Certificate } from 'node:crypto';
import type { Logger } from '../../logger.js';
import { certificateFacts } from '../certificate-check.js';
import type { TlsMaterial } from '../profile.js';
import { AlpnChallenges } from './challenges.js';
import { AcmeFiles, type AcmeStatus } from './files.js';
import { AcmeError, DEFAULT_POLL, orderCertificate, type AcmeSettings, type PollSettings } from './issuer.js';

const DAY_MS = 86_400_000;
/** setTimeout cannot wait 60 days; the renewal time is looked at again at least daily. */
const MAX_WAIT_MS = DAY_MS;

/** When a certificate valid from `notBefore` to `notAfter` is renewed: a third of its lifetime before the end. */
export function renewalTime(notBefore: number, notAfter: number): number {
  return notAfter - Math.floor((notAfter - notBefore) / 3);
}

/** How long to wait before trying a failed renewal again: a tenth of what is left, between 2 s and an hour. */
export function retryDelay(leftMs: number): number {
  return Math.min(Math.max(Math.floor(leftMs / 10), 2000), 3_600_000);
}

const show = (ms: number) => new Date(ms).toISOString();

export class AcmeCertificates {
  readonly challenges = new AlpnChallenges();
  readonly files: AcmeFiles;
  /** The certificate in use; undefined until one is loaded or obtained. */
  material: TlsMaterial | undefined;
  private x509: X509Certificate | undefined;
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  private stopped = false;
  private accountUrl: string | undefined;

  constructor(
    private readonly s: AcmeSettings,
    stateDir: string,
    private readonly logger: Logger,
    private readonly poll: PollSettings = DEFAULT_POLL,
  ) {
    this.files = new AcmeFiles(stateDir, s.directory);
  }

  private get names(): string {
    return this.s.domains.join(', ');
  }

  /** Takes the stored certificate when it can still be served; says why not otherwise. */
  async load(now = Date.now()): Promise<void> {
    const stored = await this.files.certificate();
    if (!stored) return;
    const f = certificateFacts(stored.x509);
    const missing = this.s.domains.filter((d) => stored.x509.checkHost(d) === undefined);
    if (missing.length > 0) {
      this.logger.info(`ACME: the stored certificate does not name ${missing.join(', ')}; a new one is ordered`);
      return;
    }
    if (f.notAfter <= now) {
      this.logger.info(`ACME: the stored certificate expired at ${show(f.notAfter)}; a new one is ordered`);
      return;
    }
    this.use(stored, stored.x509);
    this.accountUrl = (await this.files.status())?.accountUrl;
    this.logger.info(
      `ACME: serving the stored certificate for ${this.names} (valid until ${show(f.notAfter)}, renewal from ${show(this.renewAt())})`,
    );
  }

  private use(m: TlsMaterial, x509: X509Certificate): void {
    this.material = { cert: m.cert, key: m.key };
    this.x509 = x509;
  }

  private renewAt(): number {
    const f = certificateFacts(this.x509!);
    return renewalTime(f.notBefore, f.notAfter);
  }

  /** Orders a certificate now and starts using it; AcmeError when none can be had. */
  async obtain(): Promise<TlsMaterial> {
    const started = Date.now();
    try {
      const got = await orderCertificate(this.s, this.files, this.challenges, this.logger, this.poll);
      const x509 = new X509Certificate(got.cert);
      await this.files.saveCertificate(got);
      this.use(got, x509);
      this.accountUrl = got.accountUrl;
      const f = certificateFacts(x509);
      await this.saveStatus({
        lastAttemptAt: started,
        obtainedAt: Date.now(),
        notAfter: f.notAfter,
        renewAt: this.renewAt(),
      });
      this.logger.info(
        `ACME: certificate for ${this.names} obtained from ${this.s.directory} (valid until ${show(f.notAfter)}, renewal from ${show(this.renewAt())})`,
      );
      return this.material!;
    } catch (err) {
      const message = err instanceof AcmeError ? err.message : `unexpected failure: ${(err as Error).message}`;
      const f = this.x509 ? certificateFacts(this.x509) : undefined;
      await this.saveStatus({
        lastAttemptAt: started,
        lastError: message,
        ...(f ? { notAfter: f.notAfter, renewAt: this.renewAt() } : {}),
      }).catch(() => undefined);
      throw new AcmeError(`ACME: no certificate for ${this.names} from ${this.s.directory}: ${message}`);
    }
  }

  private async saveStatus(part: Omit<AcmeStatus, 'directory' | 'domains'>): Promise<void> {
    await this.files.saveStatus({
      directory: this.s.directory,
      domains: this.s.domains,
      ...(this.accountUrl ? { accountUrl: this.accountUrl } : {}),
      ...part,
    });
  }

  /** Renews in the background from now on; `onRenewed` gets each new certificate. */
  start(onRenewed: (m: TlsMaterial) => void): void {
    const schedule = (delayMs: number) => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.timer = undefined;
        if (Date.now() < this.renewAt()) {
          schedule(Math.min(this.renewAt() - Date.now(), MAX_WAIT_MS));
          return;
        }
        this.renewing = this.obtain()
          .then(
            (m) => {
              onRenewed(m);
              schedule(Math.min(Math.max(this.renewAt() - Date.now(), 0), MAX_WAIT_MS));
            },
            (err: unknown) => {
              const left = certificateFacts(this.x509!).notAfter - Date.now();
              const wait = retryDelay(left);
              this.logger.error(
                `${(err as Error).message}; the certificate in use ${left > 0 ? `expires at ${show(Date.now() + left)}` : 'HAS EXPIRED'}; trying again in ${Math.ceil(wait / 1000)} s`,
              );
              schedule(wait);
            },
          )
          .finally(() => {
            this.renewing = undefined;
          });
      }, delayMs);
      this.timer.unref();
    };
    schedule(Math.min(Math.max(this.renewAt() - Date.now(), 0), MAX_WAIT_MS));
  }

  /** Stops renewing; waits for a renewal under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.renewing?.catch(() => undefined);
  }
}
