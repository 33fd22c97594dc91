/**
 * Sending the verification link, and the manage link (withdraw.ts). The
 * configured command is run as `<command> <email> <url>` with execFile (no
 * shell, so nothing in the address is interpreted), a timeout, a minimal
 * environment and bounded output; STASH_MAIL_KIND in that environment says
 * which link it is (`verify` or `manage`), so one script can word both. The
 * address reaching it has passed validateEmail (no leading '-', no whitespace
 * or control characters). The URL holds the secret token, so it is never
 * logged; the command's output is logged only with the token masked.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import type { Logger } from './logger.js';
import type { Verification } from './wire/messages.js';
import { maskEmail } from './validate.js';

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export interface MailResult {
  verification: Verification;
  message: string;
}

/** Which link a mail carries: the verification of a publish, or a manage link (view and delete the address's shares). */
export type MailKind = 'verify' | 'manage';

export interface Mailer {
  send(email: string, url: string, token: string, kind?: MailKind): Promise<MailResult>;
}

const failed = (why: string): MailResult => ({
  verification: 'failed',
  message: `the verification email could not be sent (${why}); publish again later`,
});

/** Runs the operator's mail command. */
export function commandMailer(command: string, logger: Logger, timeoutMs = 15_000): Mailer {
  return {
    send(email, url, token, kind = 'verify') {
      const what = kind === 'manage' ? 'manage' : 'verification';
      return new Promise((resolve) => {
        execFile(
          command,
          [email, url],
          {
            timeout: timeoutMs,
            killSignal: 'SIGKILL',
            maxBuffer: 64 * 1024,
            env: { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', STASH_MAIL_KIND: kind },
            windowsHide: true,
          },
          (err, stdout, stderr) => {
            if (!err) {
              resolve({
                verification: 'sent',
                message: `a ${what} link was sent to ${maskEmail(email)}${kind === 'verify' ? '; open it and confirm' : ''}`,
              });
              return;
            }
            const e = err as NodeJS.ErrnoException & {
              killed?: boolean;
              signal?: string | null;
              code?: number | string | null;
            };
            const why = e.killed
              ? `timed out after ${timeoutMs} ms`
              : e.signal
                ? `killed by ${e.signal}`
                : typeof e.code === 'number'
                  ? `exit status ${e.code}`
                  : `${e.code ?? 'error'}`;
            // Mail programs print the recipient in their errors: the log gets the masked address, as everywhere else.
            const output = `${stderr}${stdout}`
              .split(token)
              .join('[token]')
              .replace(new RegExp(escapeRegExp(email), 'gi'), maskEmail(email))
              .replace(/\s+/g, ' ')
              .trim()
              .slice(0, 300);
            logger.error(
              `mail: ${what} command for ${maskEmail(email)} failed: ${why}${output ? `; output: ${output}` : ''}`,
            );
            resolve(
              failed(
                why.startsWith('exit') || why.startsWith('timed') || why.startsWith('killed')
                  ? why
                  : 'the mail command could not be run',
              ),
            );
          },
        );
      });
    },
  };
}

/** Developer mode without a command: the link goes to the console. */
export function consoleMailer(out: NodeJS.WritableStream = process.stdout): Mailer {
  return {
    async send(email, url, _token, kind = 'verify') {
      const what = kind === 'manage' ? 'manage' : 'verification';
      out.write(`${what} link for ${maskEmail(email)}: ${url}\n`);
      return { verification: 'printed', message: `developer mode: the ${what} link was printed on the server console` };
    },
  };
}

/** No command configured (and not developer mode): nothing can be sent. */
export function noMailer(logger: Logger): Mailer {
  return {
    async send(email, _url, _token, kind = 'verify') {
      logger.warn(
        `mail: no --verification-email-command configured; ${maskEmail(email)} gets no ${kind === 'manage' ? 'manage' : 'verification'} link`,
      );
      return failed('this server has no verification email command configured');
    },
  };
}

/**
 * The mailer the configuration asks for: --verification-email-command (checked
 * to be an executable file), the console with --developer, else none (with a
 * warning: publishers get no verification link).
 */
export async function configuredMailer(
  config: { verificationEmailCommand?: string | undefined; developer: boolean },
  logger: Logger,
  opts: { console?: NodeJS.WritableStream; mailTimeoutMs?: number } = {},
): Promise<Mailer> {
  if (config.verificationEmailCommand !== undefined) {
    const command = resolve(config.verificationEmailCommand);
    try {
      await access(command, constants.X_OK);
    } catch {
      throw new ConfigError(`--verification-email-command ${command}: not an executable file`);
    }
    return commandMailer(command, logger, opts.mailTimeoutMs);
  }
  if (config.developer) return consoleMailer(opts.console);
  logger.warn(
    'no --verification-email-command: publishers will get no verification link (use --developer to print links)',
  );
  return noMailer(logger);
}
