/**
 * `install` run from the single executable (stash_key_server-VERSION-linux-*)
 * copies that executable to /usr/local/bin/stash_key_server and the unit runs
 * the copy: the file the operator downloaded can then be moved or deleted,
 * and the service's dynamic user can read the copy (root's, mode 0755),
 * wherever the download was. `uninstall` removes it again.
 *
 * npm's global install puts a link of the same name in /usr/local/bin (to
 * the package's bin/stash_key_server.js); it is never replaced or removed
 * here: the operator chooses one of the two ways and removes the other.
 */
import { chmod, copyFile, lstat, mkdir, readlink, realpath, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { StashError } from '../../errors.js';
import type { InstallPaths } from './paths.js';

type Out = (line: string) => void;

/** A link where the executable goes: npm's command (or something else the operator put there). */
async function refuseLink(dest: string): Promise<void> {
  const st = await lstat(dest).catch(() => undefined);
  if (st === undefined || st.isFile()) return;
  const what = st.isSymbolicLink()
    ? `a link to ${await readlink(dest)} (npm's command, if that is bin/stash_key_server.js)`
    : 'not a regular file';
  throw new StashError(
    'INSTALL_CONFLICT',
    `${dest} is ${what}; install the single executable after removing it (npm uninstall -g stash-vault, for npm's), or run install from the npm package instead`,
  );
}

/**
 * Copies the running single executable to `paths.executable` (kept when it
 * is that very file). A new copy is written beside it and renamed over the
 * old one, so a running server's executable is never written in place.
 */
export async function installExecutable(paths: InstallPaths, out: Out): Promise<void> {
  const dest = paths.executable;
  await mkdir(dirname(dest), { recursive: true, mode: 0o755 });
  await refuseLink(dest);
  const source = await realpath(process.execPath);
  if ((await realpath(dest).catch(() => '')) === source) {
    out(`kept ${dest} (the executable running this install)`);
    return;
  }
  const temp = `${dest}.new-${process.pid}`;
  try {
    await copyFile(source, temp);
    await chmod(temp, 0o755);
    await rename(temp, dest);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  const { size } = await lstat(dest);
  out(`installed ${dest} (a copy of ${source}, ${size} bytes)`);
}

/** `uninstall`: removes the copy `install` made (never npm's link). */
export async function removeExecutable(paths: InstallPaths, out: Out): Promise<void> {
  const st = await lstat(paths.executable).catch(() => undefined);
  if (st === undefined) return;
  if (!st.isFile()) {
    out(`kept ${paths.executable} (not the single executable's copy)`);
    return;
  }
  await rm(paths.executable, { force: true });
  out(`removed ${paths.executable}`);
}
