/**
 * Where the certificate of a server comes from, in one place for
 * server.ts: the files of --tls-cert/--tls-key (read again on SIGHUP by
 * reload.ts), ACME for --acme-domain (acme/manager.ts: obtained before the
 * first request, renewed while running), or none (plain HTTP, behind a proxy).
 */
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { ServerConfig } from '../server-config.js';
import { LETS_ENCRYPT_DIRECTORY } from '../cli/acme-values.js';
import type { Logger } from '../logger.js';
import { readTls } from '../tls-files.js';
import { AcmeCertificates } from './acme/manager.js';
import type { PollSettings } from './acme/issuer.js';
import { certificateProblems } from './certificate-check.js';
import type { AlpnChallengeResponder } from './port-guard.js';
import { profileOptions, type TlsMaterial } from './profile.js';

export class ServerCertificates {
  private constructor(
    private readonly config: ServerConfig,
    private readonly logger: Logger,
    /** The certificate served now; undefined for plain HTTP, or before ACME has one. */
    public material: TlsMaterial | undefined,
    readonly acme: AcmeCertificates | undefined,
  ) {}

  /** Reads the --tls-cert files (ConfigError naming a bad one) or the stored ACME certificate. */
  static async open(config: ServerConfig, logger: Logger, poll?: PollSettings): Promise<ServerCertificates> {
    if (config.acmeDomains.length > 0) {
      const settings = {
        domains: config.acmeDomains,
        email: config.acmeEmail,
        directory: config.acmeDirectory ?? LETS_ENCRYPT_DIRECTORY,
      };
      const acme = new AcmeCertificates(settings, config.stateDir, logger, poll);
      await acme.load();
      return new ServerCertificates(config, logger, acme.material, acme);
    }
    const files =
      config.tlsCert !== undefined && config.tlsKey !== undefined
        ? await readTls(config.tlsCert, config.tlsKey)
        : undefined;
    return new ServerCertificates(config, logger, files, undefined);
  }

  /** The HTTPS settings of createHttpServer: with ACME the server speaks TLS before it has a certificate, and answers challenges. */
  get https(): { acme?: boolean; challenges?: AlpnChallengeResponder } {
    return this.acme ? { acme: true, challenges: this.acme.challenges } : {};
  }

  /** Whether an ACME validation is under way: new connections then stay with the process that answers it. */
  challengePending(): boolean {
    return this.acme?.challenges.pending() ?? false;
  }

  /**
   * Once `server` listens: with ACME and no usable stored certificate, one
   * is ordered now (the CA validates on this very port); AcmeError if none
   * can be had. Resolves with the certificate to serve.
   */
  async first(server: Server): Promise<TlsMaterial | undefined> {
    if (this.acme && !this.material) {
      this.logger.info(
        `ACME: ordering a certificate for ${this.config.acmeDomains.join(', ')} from ${this.config.acmeDirectory ?? LETS_ENCRYPT_DIRECTORY}`,
      );
      this.material = await this.acme.obtain();
      (server as unknown as HttpsServer).setSecureContext(profileOptions(this.material));
    }
    return this.material;
  }

  /** The public URL when --public-url is not given and ACME names the host: https://first-name[:port]. */
  defaultPublicUrl(port: number): string | undefined {
    const name = this.config.acmeDomains[0];
    return name === undefined ? undefined : `https://${name}${port === 443 ? '' : `:${port}`}`;
  }

  /** Logs what is wrong with the certificate for clients of `publicUrl`. */
  warn(publicUrl: string): void {
    if (!this.material) return;
    const source = this.acme ? `ACME (${this.acme.files.dir})` : `--tls-cert ${this.config.tlsCert}`;
    // An ACME certificate is renewed by the server itself: only a failed renewal is worth a line (manager.ts logs it).
    const problems = certificateProblems(this.material.cert, source, publicUrl, Date.now(), {
      expiringSoon: !this.acme,
    });
    for (const p of problems) this.logger.warn(p);
  }

  /** Renews ACME certificates from now on; `apply` puts each new one into every listener. */
  renew(apply: (m: TlsMaterial) => void): void {
    this.acme?.start((m) => {
      this.material = m;
      apply(m);
    });
  }

  async stop(): Promise<void> {
    await this.acme?.stop();
  }
}
