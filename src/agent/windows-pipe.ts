/**
 * The agent's transport on Windows: the named pipe that the addon creates,
 * accepts and connects (native/windows/pipe_windows.cc), with ordinary Node
 * sockets on top, so that AgentConnection and AgentClient stay the same on
 * every platform.
 *
 * Why not net.Server / net.connect: libuv creates pipe instances with the
 * default DACL (Everyone may read), cannot add PIPE_REJECT_REMOTE_CLIENTS,
 * never shows the instance handle that the client's process id comes from,
 * and connects with impersonation allowed and without looking at who serves
 * the name. The addon does all of that and hands over each checked connection
 * as a CRT descriptor, which `new net.Socket({fd})` wraps.
 */
import { EventEmitter } from 'node:events';
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import type { NativePipeConnection, NativePipeEvent, NativePipeServer } from '../native/index.js';

/** The two addon calls this module needs (src/native/index.ts on Windows). */
export interface PipeNative {
  createPipeServer(name: string, callback: (event: NativePipeEvent) => void): NativePipeServer;
  pipeConnect(name: string, timeoutMs: number): Promise<NativePipeConnection>;
}

const loadNative = async (): Promise<PipeNative> => import('../native/index.js');

/** A duplex Node socket over a descriptor the addon opened in Node's own CRT (uv_open_osfhandle). */
function socketFromFd(fd: number): Socket {
  try {
    return new Socket({ fd, readable: true, writable: true });
  } catch (err) {
    try {
      closeSync(fd);
    } catch {
      /* already closed */
    }
    throw err;
  }
}

/**
 * A listening pipe. Emits 'refused' (pid, reason) for a client that does not
 * run as our user, and 'error' (Error with `code`) when the accept thread
 * stops; with no 'error' listener that becomes an uncaught exception, which
 * the agent treats as fatal (it cannot serve anyone any more).
 */
export class WindowsPipeListener extends EventEmitter {
  private closed = false;
  private readonly server: NativePipeServer;

  constructor(name: string, onConnection: (socket: Socket, pid: number) => void, native: PipeNative) {
    super();
    this.server = native.createPipeServer(name, (event) => this.onEvent(event, onConnection));
  }

  private onEvent(event: NativePipeEvent, onConnection: (socket: Socket, pid: number) => void): void {
    if (event.type === 'refused') {
      this.emit('refused', event.pid, event.reason);
      return;
    }
    if (event.type === 'error') {
      this.emit(
        'error',
        Object.assign(new Error(`the agent pipe stopped accepting: ${event.message}`), { code: event.code }),
      );
      return;
    }
    let socket: Socket;
    try {
      socket = socketFromFd(event.fd);
    } catch (err) {
      this.emit('refused', event.pid, `cannot open a stream on the connection: ${(err as Error).message}`);
      return;
    }
    // A connection queued on the addon's thread before close() is not served.
    if (this.closed) socket.destroy();
    else onConnection(socket, event.pid);
  }

  /** Stops accepting; the pipe name goes away with its last instance. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.server.close();
  }
}

/**
 * Claims the pipe `name` and serves it. Rejects with code EADDRINUSE when the
 * name exists already (another agent, or a squatter: either way not ours).
 */
export async function listenWindowsPipe(
  name: string,
  onConnection: (socket: Socket, pid: number) => void,
  native?: PipeNative,
): Promise<WindowsPipeListener> {
  return new WindowsPipeListener(name, onConnection, native ?? (await loadNative()));
}

/**
 * Connects to the agent's pipe. Resolves only when the process serving `name`
 * runs as our user; rejects with ENOENT when no pipe has that name (no agent:
 * autostart applies), EACCES / EPERM when the name belongs to someone else.
 */
export async function connectWindowsPipe(name: string, timeoutMs: number, native?: PipeNative): Promise<Socket> {
  const { fd } = await (native ?? (await loadNative())).pipeConnect(name, timeoutMs);
  return socketFromFd(fd);
}
