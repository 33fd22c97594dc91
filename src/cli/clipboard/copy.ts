/**
 * `--clip` for get and otp: the options are checked and the clipboard tool
 * found before anything is decrypted (clipRequest), then the value is handed
 * to a detached `stash __clip-clear` helper (helper.ts) on a pipe, which
 * copies it, outlives this command, and clears the clipboard later.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { StashError, UsageError } from '../../errors.js';
import { note, warn } from '../output.js';
import type { Invocation } from '../command-types.js';
import type { HelperReport } from './helper.js';
import type { ToolName } from './index.js';

export interface ClipRequest {
  tool: ToolName;
  seconds: number;
}

/**
 * The --clip request of an invocation, or null without --clip. Checks
 * --clip-seconds, STASH_CLIP_SECONDS and the config file, and that the
 * clipboard tool is installed: all before a password is asked.
 */
export async function clipRequest(values: Invocation['values']): Promise<ClipRequest | null> {
  const option = values['clip-seconds'];
  if (values.clip !== true) {
    if (option !== undefined) throw new UsageError('--clip-seconds goes with --clip');
    return null;
  }
  const { loadConfig, MAX_CLIP_SECONDS } = await import('../../config/app-config.js');
  let seconds: number;
  if (typeof option === 'string') {
    if (!/^[0-9]+$/.test(option) || Number(option) < 1 || Number(option) > MAX_CLIP_SECONDS) {
      throw new UsageError(
        `--clip-seconds must be a whole number of seconds from 1 to ${MAX_CLIP_SECONDS}, got ${JSON.stringify(option.slice(0, 40))}`,
      );
    }
    seconds = Number(option);
  } else {
    seconds = (await loadConfig()).clipSeconds.value;
  }
  const { clipboardTool, toolFor } = await import('./index.js');
  const tool = toolFor();
  await clipboardTool(tool);
  return { tool, seconds };
}

/** Reads the helper's one JSON line (it ends its stdout's use after it). */
function readReport(child: ReturnType<typeof spawn>, timeoutMs: number): Promise<HelperReport> {
  return new Promise((resolve) => {
    let text = '';
    const finish = (r: HelperReport): void => {
      clearTimeout(timer);
      child.stdout!.removeAllListeners('data');
      child.stdout!.destroy();
      resolve(r);
    };
    const timer = setTimeout(
      () =>
        finish({
          ok: false,
          code: 'CLIPBOARD_UNAVAILABLE',
          message: `the clipboard helper did not answer within ${timeoutMs / 1000} s`,
        }),
      timeoutMs,
    );
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString('utf8');
      const nl = text.indexOf('\n');
      if (nl < 0) return;
      try {
        finish(JSON.parse(text.slice(0, nl)) as HelperReport);
      } catch {
        finish({
          ok: false,
          code: 'CLIPBOARD_UNAVAILABLE',
          message: 'the clipboard helper answered something unexpected',
        });
      }
    });
    child.stdout!.once('end', () =>
      finish({ ok: false, code: 'CLIPBOARD_UNAVAILABLE', message: 'the clipboard helper exited without copying' }),
    );
    child.once('error', (err) =>
      finish({
        ok: false,
        code: 'CLIPBOARD_UNAVAILABLE',
        message: `cannot start the clipboard helper: ${err.message}`,
      }),
    );
  });
}

/**
 * Copies `value` through a new helper and says so on stderr (`what`: the
 * name shown, e.g. "API_TOKEN"). The caller still wipes `value`.
 * @throws StashError with the helper's code (CLIPBOARD_UNAVAILABLE: exit 69)
 */
export async function copyToClipboard(value: Buffer, what: string, req: ClipRequest): Promise<void> {
  const { packageRoot } = await import('../../native/binding.js');
  const child = spawn(
    process.execPath,
    [join(packageRoot, 'bin', 'stash.js'), '__clip-clear', '--tool', req.tool, '--seconds', String(req.seconds)],
    {
      // Its own session: the helper outlives this command and must not get the terminal's Ctrl-C or hang-up.
      detached: true,
      stdio: ['pipe', 'pipe', 'ignore'],
      env: process.env,
      windowsHide: true,
    },
  );
  child.stdin!.on('error', () => {
    /* the helper failed before reading; its report says why */
  });
  child.stdin!.end(value);
  // The copy itself may take a moment (wl-copy, PowerShell); the wait covers replacing an earlier helper too.
  const r = await readReport(child, 20_000);
  child.unref();
  if (!r.ok) throw new StashError(r.code, r.message);
  note(
    `Copied ${what} to the clipboard; it is cleared in ${req.seconds} s${r.marked ? ' (marked as sensitive for clipboard managers)' : ''}.`,
  );
  if (!r.registered) {
    warn(
      `the session agent does not know of the clipboard clear (${r.agentProblem ?? 'unavailable'}), so a suspend before then will not clear it`,
    );
  }
}
