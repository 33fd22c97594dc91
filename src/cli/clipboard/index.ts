/**
 * The clipboard tool for this session, picked in one place: STASH_CLIPBOARD
 * when set, else Windows PowerShell on Windows, pbcopy on macOS, wl-clipboard
 * in a Wayland session (WAYLAND_DISPLAY), xclip (else xsel) in an X11 one
 * (DISPLAY). The programs are looked up on PATH here, before anything is
 * decrypted, so a missing one is an error that names its package and costs
 * no password.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { ClipboardError, type ClipboardTool, type ToolName } from './tool.js';

export { ClipboardError, type ClipboardTool, type ToolName } from './tool.js';

const loaders: Record<ToolName, () => Promise<ClipboardTool>> = {
  xclip: async () => (await import('./xclip.js')).xclip,
  xsel: async () => (await import('./xsel.js')).xsel,
  'wl-clipboard': async () => (await import('./wayland.js')).wayland,
  pbcopy: async () => (await import('./macos.js')).macos,
  powershell: async () => (await import('./windows.js')).windows,
};

export const TOOL_NAMES = Object.keys(loaders) as ToolName[];

export function isToolName(name: string): name is ToolName {
  return Object.hasOwn(loaders, name);
}

/** True when `program` is an executable file in one of PATH's folders. */
export function onPath(program: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const exts =
    process.platform === 'win32' && !/\.[a-z]+$/i.test(program) ? (env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      try {
        accessSync(join(dir, program + ext), constants.X_OK);
        return true;
      } catch {
        /* not here */
      }
    }
  }
  return false;
}

/** The tool `name`, after checking its programs are installed. */
export async function clipboardTool(name: ToolName, env: NodeJS.ProcessEnv = process.env): Promise<ClipboardTool> {
  const tool = await loaders[name]();
  const missing = tool.programs.filter((p) => !onPath(p, env));
  if (missing.length > 0) throw new ClipboardError(`${missing.join(' and ')} not found on PATH: ${tool.install}`);
  return tool;
}

/** The name of the tool this session should use; throws ClipboardError when there is no clipboard to use. */
export function toolFor(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): ToolName {
  const forced = env.STASH_CLIPBOARD;
  if (forced) {
    if (!isToolName(forced))
      throw new ClipboardError(
        `STASH_CLIPBOARD must be one of ${TOOL_NAMES.join(', ')}, got ${JSON.stringify(forced.slice(0, 40))}`,
      );
    return forced;
  }
  if (platform === 'win32') return 'powershell';
  if (platform === 'darwin') return 'pbcopy';
  if (env.WAYLAND_DISPLAY) return 'wl-clipboard';
  if (env.DISPLAY) return onPath('xclip', env) || !onPath('xsel', env) ? 'xclip' : 'xsel';
  throw new ClipboardError(
    'there is no clipboard to use: neither WAYLAND_DISPLAY nor DISPLAY is set (is this a graphical session?)',
  );
}
