/**
 * `stash otp CONTAINER NAME [--json]`: the current TOTP code of a seed stored
 * with `stash set C NAME --totp ...` (RFC 6238; totp/totp.ts). Like `get`, the
 * code goes to stdout with a newline only on a terminal; a terminal also
 * hears how long it stays valid.
 */
import { StashError, UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { validateContainerName, validateEntryName } from '../../vault/names.js';
import { wipe } from '../../vault/secure.js';
import { readEntryOf } from '../container-access.js';
import { note, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { Session } from '../session.js';
import { isTotpValue, parseTotp } from '../totp/otpauth.js';
import { secondsLeft, totpAt } from '../totp/totp.js';
import { isTerminal } from '../terminal.js';

export async function run(inv: Invocation): Promise<number> {
  const [container, name] = inv.positionals as [string, string];
  validateContainerName(container);
  validateEntryName(name);
  // --clip is checked (and its tool found) before any password is asked; loaded only with --clip.
  const clip =
    inv.values.clip === true || inv.values['clip-seconds'] !== undefined ? await import('../clipboard/copy.js') : null;
  if (inv.values.clip === true && inv.values.json === true)
    throw new UsageError('--clip and --json do not go together');
  const request = clip ? await clip.clipRequest(inv.values) : null;
  const session = new Session(inv.values);
  try {
    const value = await session.withContentKey(container, (key, info) => readEntryOf(session.dir, info, key, name));
    let params;
    try {
      if (!isTotpValue(value)) {
        throw new StashError(
          'NOT_TOTP',
          `${container}/${name} is not a TOTP seed (store one with: stash set ${container} ${name} --totp -)`,
        );
      }
      params = parseTotp(value.toString('latin1'));
    } finally {
      wipe(value);
    }
    const now = Date.now() / 1000;
    const code = totpAt(params, now);
    params.secret.fill(0);
    const left = secondsLeft(params.period, now);
    if (inv.values.json === true) {
      outJson({
        code,
        expiresInSeconds: left,
        period: params.period,
        digits: params.digits,
        algorithm: params.algorithm,
      });
      return 0;
    }
    if (clip && request) {
      await clip.copyToClipboard(Buffer.from(code), `the code of ${name}`, request);
      if (isTerminal(2)) note(`valid for ${left} more second${left === 1 ? '' : 's'}`);
      return 0;
    }
    await writeStdout(code);
    if (isTerminal(1)) await writeStdout('\n');
    if (isTerminal(2)) note(`valid for ${left} more second${left === 1 ? '' : 's'}`);
    return 0;
  } finally {
    session.close();
  }
}
