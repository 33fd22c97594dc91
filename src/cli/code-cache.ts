/**
 * A V8 code cache for the CLI bundle (dist/cli/stash.cjs), on every Node line
 * (Node 22's module.enableCompileCache keeps only the top level: launch.ts).
 * Compiling the bundle costs about as
 * much as all of `stash get`'s own work (docs/benchmarks.md); with the cache,
 * V8 deserializes the bytecode of the functions earlier runs compiled.
 *
 * - One file per Node version and architecture in `<cache folder>/code-cache/`
 *   (owner-only: 0700 folder, 0600 file, written to a temporary name and
 *   renamed, so a reader sees a whole file or none).
 * - V8 checks only the source's length and its own version and flags, and a
 *   damaged payload crashes the process (a V8 fatal error, checked). So the
 *   file names the bundle it was made from (the id scripts/bundle-cli.js
 *   writes into it, and the bundle file's size and modification time) and
 *   holds the V8 data twice: the copies are compared (memcmp) before V8 sees
 *   one. A check summing the bytes would need node:zlib or node:crypto
 *   loaded, about 1.5 ms of CPU per run; a comparison needs nothing loaded.
 *   Anything that does not match is ignored and rewritten.
 * - A file or folder that is not ours, or that others can write, is never
 *   read or written: compiled code from it would run as us.
 * - It holds bytecode of the bundle's own functions and literals of its
 *   source, never values of a run (keys, passwords, entries); tested.
 * - The data is made at exit, after the command ran, so that it holds the
 *   functions that command compiled. Each command word a cache was made
 *   with is recorded; a command not among them rewrites it (the old
 *   functions and its own), so after a few different commands nothing is
 *   written any more.
 */
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import Module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Script, type ScriptOptions } from 'node:vm';

const MAGIC = Buffer.from('STASHCC\u0002', 'latin1');
/** The bundle's id as scripts/bundle-cli.js writes it into its first lines. */
const ID_MARK = '// bundle id: ';
export const BUNDLE_ID_CHARS = 32;
const ID_AT = MAGIC.length;
const SIZE_AT = ID_AT + BUNDLE_ID_CHARS;
const MTIME_AT = SIZE_AT + 4;
const DATA_LENGTH_AT = MTIME_AT + 8;
const LABELS_LENGTH_AT = DATA_LENGTH_AT + 4;
/** magic, bundle id, bundle size (u32) and mtime (f64, ms), V8 data length (u32), labels' length (u16). */
const HEADER_BYTES = LABELS_LENGTH_AT + 2;
/** The largest cache file read (the bundle's is about 300 KB). */
const MAX_FILE_BYTES = 64 << 20;
const MAX_LABELS = 64;
const LABEL = /^[a-z0-9_-]{1,32}$/;

/** What became of the cache for this run. */
export type CodeCacheStatus =
  | 'accepted' // V8 took the cached data
  | 'missing' // no cache file yet
  | 'invalid' // a file that does not match the bundle, or is damaged: ignored, rewritten
  | 'rejected' // V8 refused it (another V8 version or flags): rewritten
  | 'unsafe' // the folder or the file is not ours, or others can write it: not used at all
  | 'off'; // no cache folder given

/** The bundle file's identity on disk: a cache names the one it was made from. */
export interface BundleFile {
  size: number;
  mtimeMs: number;
}

export interface BundleOptions {
  /** The folder for the cache file; null: compile without a cache. */
  dir: string | null;
  /** statSync() of the bundle (the launcher has it already); without it no cache is used. */
  file?: BundleFile;
  /** Receives one line per decision (STASH_CODE_CACHE=trace). */
  trace?: (line: string) => void;
}

export interface LoadedBundle {
  exports: Record<string, unknown>;
  status: CodeCacheStatus;
  /** Writes the cache at exit when it is missing, was refused, or lacks `label` (a command word). */
  saveOnExit(label: string): void;
}

/** The cache file's name for this Node: V8 refuses data of another version anyway. */
export function codeCacheFile(dir: string): string {
  return join(dir, `cli-node${process.versions.node}-${process.arch}.bin`);
}

/** The id scripts/bundle-cli.js wrote near the top of the bundle; null when there is none. */
export function bundleId(source: Buffer): string | null {
  const head = source.toString('latin1', 0, 512);
  const at = head.indexOf(ID_MARK);
  if (at < 0) return null;
  const id = head.slice(at + ID_MARK.length, at + ID_MARK.length + BUNDLE_ID_CHARS);
  return /^[0-9a-f]+$/.test(id) && id.length === BUNDLE_ID_CHARS ? id : null;
}

/** What a cache file must name to be used for this bundle. */
interface Identity extends BundleFile {
  id: string;
}

/** Node's CommonJS wrapper (Module.wrap, untyped in @types/node): the same function require() compiles. */
const wrap = (Module as unknown as { wrap(code: string): string }).wrap;

const ownUid = (): number | null => (typeof process.getuid === 'function' ? process.getuid() : null);

/** Ours and writable by nobody else (POSIX); on Windows the folder is the user's own profile. */
function trusted(stats: { uid: number; mode: number }): boolean {
  const uid = ownUid();
  return uid === null || (stats.uid === uid && (stats.mode & 0o022) === 0);
}

/** The folder exists, is a real folder (not a link), is ours and only ours. */
export function safeFolder(dir: string): boolean {
  try {
    const st = lstatSync(dir);
    return st.isDirectory() && trusted(st);
  } catch {
    return false;
  }
}

interface CacheFile {
  data: Buffer;
  labels: string[];
}

/** Reads and checks the cache file against the bundle's identity. */
function readCache(path: string, want: Identity): CacheFile | 'missing' | 'invalid' | 'unsafe' {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : 'invalid';
  }
  let file: Buffer;
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || !trusted(st)) return 'unsafe';
    if (st.size < HEADER_BYTES || st.size > MAX_FILE_BYTES) return 'invalid';
    file = Buffer.allocUnsafe(st.size);
    let got = 0;
    while (got < file.length) {
      const n = readSync(fd, file, got, file.length - got, got);
      if (n === 0) break;
      got += n;
    }
    if (got !== file.length) return 'invalid';
  } catch {
    return 'invalid';
  } finally {
    closeSync(fd);
  }
  if (!file.subarray(0, MAGIC.length).equals(MAGIC)) return 'invalid';
  const dataLength = file.readUInt32LE(DATA_LENGTH_AT);
  const labelsLength = file.readUInt16LE(LABELS_LENGTH_AT);
  if (HEADER_BYTES + labelsLength + 2 * dataLength !== file.length) return 'invalid';
  if (file.toString('latin1', ID_AT, ID_AT + BUNDLE_ID_CHARS) !== want.id) return 'invalid';
  if (file.readUInt32LE(SIZE_AT) !== want.size || file.readDoubleLE(MTIME_AT) !== want.mtimeMs) return 'invalid';
  const at = HEADER_BYTES + labelsLength;
  const data = file.subarray(at, at + dataLength);
  if (!data.equals(file.subarray(at + dataLength))) return 'invalid';
  const labels = file
    .toString('latin1', HEADER_BYTES, at)
    .split(',')
    .filter((l) => LABEL.test(l));
  return { data, labels };
}

/** Writes the cache file whole (temporary name, then rename); throws on failure. */
function writeCache(dir: string, path: string, identity: Identity, data: Buffer, labels: string[]): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!safeFolder(dir)) throw new Error(`${dir} is not a private folder of this user`);
  const names = Buffer.from(labels.join(','), 'latin1');
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header);
  header.write(identity.id, ID_AT, 'latin1');
  header.writeUInt32LE(identity.size, SIZE_AT);
  header.writeDoubleLE(identity.mtimeMs, MTIME_AT);
  header.writeUInt32LE(data.length, DATA_LENGTH_AT);
  header.writeUInt16LE(names.length, LABELS_LENGTH_AT);
  const tmp = join(dir, `.${process.pid}-${Math.random().toString(16).slice(2, 10)}.tmp`);
  try {
    writeFileSync(tmp, Buffer.concat([header, names, data, data]), { mode: 0o600, flag: 'wx' });
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      /* never written */
    }
    throw err;
  }
}

/**
 * Loads a CommonJS bundle as require() would (same wrapper, `require`
 * relative to it, an entry in require.cache), compiled with the cached code
 * when there is a valid cache for exactly this bundle. Any trouble with the
 * cache is reported through `trace` and otherwise ignored. The file must be
 * ASCII (it is read as latin1).
 */
export function loadBundle(file: string, opts: BundleOptions): LoadedBundle {
  const trace = opts.trace ?? ((): void => {});
  const source = readFileSync(file);
  const id = bundleId(source);
  const identity: Identity | null =
    id !== null && opts.file ? { id, size: opts.file.size, mtimeMs: opts.file.mtimeMs } : null;
  const path = opts.dir === null || identity === null ? null : codeCacheFile(opts.dir);
  let status: CodeCacheStatus = 'off';
  let cached: CacheFile | null = null;
  if (path !== null && opts.dir !== null && identity !== null) {
    const found = readCache(path, identity);
    if (typeof found !== 'string') cached = found;
    status = typeof found === 'string' ? found : 'accepted';
    if (status !== 'missing' && !safeFolder(opts.dir)) {
      status = 'unsafe';
      cached = null;
    }
  }
  const options: ScriptOptions = { filename: file };
  if (cached !== null) options.cachedData = cached.data;
  // ASCII only (scripts/bundle-cli.js checks): latin1 is a plain copy, UTF-8 would be decoded.
  const script = new Script(wrap(source.toString('latin1')), options);
  // Set only when cachedData was given.
  if (cached !== null && script.cachedDataRejected === true) status = 'rejected';
  trace(
    `code cache ${path ?? '(none)'}: ${status}${status === 'accepted' && cached ? ` (made by: ${cached.labels.join(', ')})` : ''}`,
  );
  const require = createRequire(file);
  const mod = new Module(file);
  mod.filename = file;
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void;
  wrapper.call(mod.exports, mod.exports, require, mod, file, dirname(file));
  mod.loaded = true;
  require.cache[file] = mod;
  let saving = false;
  return {
    exports: mod.exports as Record<string, unknown>,
    status,
    saveOnExit(label: string): void {
      if (saving || path === null || opts.dir === null || identity === null || status === 'off' || status === 'unsafe')
        return;
      const name = LABEL.test(label) ? label : 'other';
      const before = status === 'accepted' && cached ? cached.labels : [];
      if (before.includes(name)) return;
      const labels = [...before, name].slice(-MAX_LABELS);
      saving = true;
      process.once('exit', () => {
        try {
          writeCache(opts.dir as string, path, identity, script.createCachedData(), labels);
          trace(`code cache written: ${path} (made by: ${labels.join(', ')})`);
        } catch (err) {
          trace(`code cache not written: ${(err as Error).message}`);
        }
      });
    },
  };
}
