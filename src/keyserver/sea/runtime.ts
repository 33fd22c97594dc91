/**
 * What differs when the key server runs as a Node single executable (the
 * release's stash_key_server-VERSION-linux-x64 and -linux-arm64, built by
 * scripts/release/sea.js) rather than as `node bin/stash_key_server.js`.
 *
 * Node 20's single executable takes no script path: process.argv is
 * [executable, argv0, ...arguments] and every argument reaches our own
 * parser, so node flags must come through NODE_OPTIONS. fork(modulePath)
 * always passes a module path first; from a single executable that path
 * would arrive as the command (`[executable, executable, path,
 * '__fetch-process']`), so the executable is started with spawn() and an
 * IPC channel instead.
 */
import { fork, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { isSea } from 'node:sea';

/** True inside a Node single executable. */
export function isSingleExecutable(): boolean {
  return isSea();
}

export interface SelfChildOptions {
  /** Must hold one 'ipc' entry. */
  stdio: StdioOptions;
  serialization: 'json' | 'advanced';
}

/**
 * Starts this same program again with `args` and an IPC channel: the same
 * node, node flags and entry script (fork), or the same single executable
 * (its NODE_OPTIONS, and with it the unit's memory flags, is inherited).
 */
export function startSelf(args: string[], options: SelfChildOptions): ChildProcess {
  if (isSingleExecutable())
    return spawn(process.execPath, args, { stdio: options.stdio, serialization: options.serialization });
  return fork(process.argv[1]!, args, {
    execArgv: process.execArgv,
    stdio: options.stdio,
    serialization: options.serialization,
  });
}
