/**
 * Typed capability wrappers over the native addon. Arguments are checked here,
 * before the native call; native failures keep their errno `code`.
 */
import type { Socket } from 'node:net';
import { NativeError } from '../errors.js';
import {
  loadBinding,
  type HardenReport,
  type NativePipeConnection,
  type NativePipeEvent,
  type NativePipeServer,
  type PeerCredentials,
  type ProcessPosture,
} from './binding.js';

export type {
  HardenReport,
  NativePipeConnection,
  NativePipeEvent,
  NativePipeServer,
  PeerCredentials,
  ProcessPosture,
  ResourceLimit,
} from './binding.js';

/** syslog(3) priorities, shared with the Windows Event Log mapping. */
export const LogLevel = { error: 3, warning: 4, notice: 5, info: 6, debug: 7 } as const;
export type LogLevelName = keyof typeof LogLevel;

/** The file descriptor behind a connected net.Socket (Unix only). */
export function socketFd(socket: Socket): number {
  const handle = (socket as unknown as { _handle?: { fd?: unknown } })._handle;
  const fd = handle?.fd;
  if (typeof fd !== 'number' || fd < 0) {
    throw new NativeError('EBADF', 'the socket has no file descriptor (closed, or not a Unix socket)');
  }
  return fd;
}

/**
 * Kernel-reported identity of the process at the other end of a Unix socket.
 * Accepts a file descriptor or a connected net.Socket.
 */
export function peerCredentials(target: number | Socket): PeerCredentials {
  const fd = typeof target === 'number' ? target : socketFd(target);
  if (!Number.isInteger(fd) || fd < 0) throw new NativeError('EINVAL', `not a file descriptor: ${fd}`);
  return loadBinding().peerCredentials(fd);
}

/** Disables core dumps and same-user debugging of this process; reports what it did. */
export function hardenProcess(): HardenReport {
  return loadBinding().hardenProcess();
}

/** Current dumpable flag and core/memlock limits, without changing anything. */
export function processPosture(): ProcessPosture {
  return loadBinding().processPosture();
}

/** Opens the system log (syslog on Unix, Event Log source on Windows). */
export function openSystemLog(ident: string): void {
  if (ident.length === 0 || ident.length > 64) throw new NativeError('EINVAL', 'log identity must be 1..64 characters');
  loadBinding().openSystemLog(ident);
}

/** Writes one line to the system log opened by openSystemLog. */
export function systemLog(level: LogLevelName, message: string): void {
  const priority = LogLevel[level];
  if (priority === undefined) throw new NativeError('EINVAL', `unknown log level: ${String(level)}`);
  loadBinding().systemLog(priority, message);
}

export function closeSystemLog(): void {
  loadBinding().closeSystemLog();
}

/** `\\.\pipe\<name>`: a local pipe, one name segment of at most 240 characters (Windows allows 256 in all). */
const PIPE_NAME = /^\\\\\.\\pipe\\[^\\]{1,240}$/;

function checkPipeName(name: string): void {
  if (typeof name !== 'string' || !PIPE_NAME.test(name))
    throw new NativeError('EINVAL', `not a local pipe name: ${JSON.stringify(name)}`);
}

function pipeBinding(): Required<Pick<ReturnType<typeof loadBinding>, 'PipeServer' | 'pipeConnect'>> {
  const { PipeServer, pipeConnect } = loadBinding();
  if (!PipeServer || !pipeConnect) throw new NativeError('ENOTSUP', 'named pipes are served natively on Windows only');
  return { PipeServer, pipeConnect };
}

/**
 * Windows: claims the named pipe `name` and reports each accepted client (same user,
 * checked by SID) or refusal. Throws EADDRINUSE when the name exists already.
 */
export function createPipeServer(name: string, callback: (event: NativePipeEvent) => void): NativePipeServer {
  checkPipeName(name);
  if (typeof callback !== 'function') throw new NativeError('EINVAL', 'createPipeServer needs a callback');
  return new (pipeBinding().PipeServer)(name, callback);
}

/** Windows: a client end of `name` whose server runs as our user, within `timeoutMs` when every instance is busy. */
export function pipeConnect(name: string, timeoutMs: number): Promise<NativePipeConnection> {
  checkPipeName(name);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > 600_000) {
    throw new NativeError('EINVAL', `timeoutMs must be an integer 0..600000, got ${timeoutMs}`);
  }
  return pipeBinding().pipeConnect(name, timeoutMs);
}
