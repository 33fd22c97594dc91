/**
 * `stash otp [CONTAINER] PATH [--json]`: the current TOTP code of the entry's
 * `totp` field, or of its value when it has none (a seed stored with `stash
 * set C PATH --totp ...`) (RFC 6238; totp/totp.ts). Like `get`, the
 * code goes to stdout with a newline only on a terminal; a terminal also
 * hears how long it stays valid.
 */
import { StashError, UsageError } from '../../errors.js';
import { writeStdout } from '../../output-streams.js';
import { wipeEntries } from '../../vault/container-body.js';
import { entryNotFound } from '../../vault/containers.js';
import { fieldKey } from '../../vault/entry-path.js';
import { secureCopy, wipe } from '../../vault/secure.js';
import { readEntriesOf } from '../container-access.js';
import { note, outJson } from '../output.js';
import type { Invocation } from '../command-types.js';
import { entryTarget } from '../entry-target.js';
import { Session } from '../session.js';
import { isTotpValue, parseTotp } from '../totp/otpauth.js';
import { secondsLeft, totpAt } from '../totp/totp.js';
import { isTerminal } from '../terminal.js';

export async function run(inv: Invocation): Promise<number> {
  const { container, path: name } = await entryTarget(inv);
  // --clip is checked (and its tool found) before any password is asked; loaded only with --clip.
  const clip =
    inv.values.clip === true || inv.values['clip-seconds'] !== undefined ? await import('../clipboard/copy.js') : null;
  if (inv.values.clip === true && inv.values.json === true)
    throw new UsageError('--clip and --json do not go together');
  const request = clip ? await clip.clipRequest(inv.values) : null;
  const session = new Session(inv.values);
  try {
    const value = await session.withContentKey(container, async (key, info) => {
      const entries = await readEntriesOf(session.dir, info, key);
      try {
        const seed = entries.get(fieldKey(name, 'totp')) ?? entries.get(name);
        if (seed === undefined) throw entryNotFound(container, name, entries.keys());
        return secureCopy(seed);
      } finally {
        wipeEntries(entries);
      }
    });
    let params;
    try {
      if (!isTotpValue(value)) {
        throw new StashError(
          'NOT_TOTP',
          `${container}/${name} is not a TOTP seed and has no totp field (store one with: stash set ${container} ${name} --totp -, or --field totp=URI)`,
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
