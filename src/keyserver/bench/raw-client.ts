/**
 * A lean HTTP/1.1 keep-alive client for load generation: requests are
 * pre-serialised bytes written on plain sockets, and answers are parsed only
 * as far as the status line, Content-Length and the body. It does a fraction
 * of node:http's work per request, so the load generator is not the
 * bottleneck when it shares a machine with the server (autocannon works the
 * same way). Answers without Content-Length (chunked) are refused as errors.
 */
import { connect, type Socket } from 'node:net';
import type { HttpAnswer } from './load.js';

const HEAD_END = Buffer.from('\r\n\r\n');

interface Waiter {
  resolve(a: HttpAnswer): void;
  reject(e: Error): void;
}

class Connection {
  private buffered: Buffer = Buffer.alloc(0);
  private waiter: Waiter | undefined;
  private failed: Error | undefined;

  constructor(readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) => this.fail(e));
    socket.on('close', () => this.fail(new Error('connection closed by the server')));
  }

  get usable(): boolean {
    return this.failed === undefined;
  }

  private fail(e: Error): void {
    this.failed ??= e;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(e);
  }

  send(bytes: Buffer): Promise<HttpAnswer> {
    if (this.failed) return Promise.reject(this.failed);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.socket.write(bytes);
    });
  }

  private onData(d: Buffer): void {
    this.buffered = this.buffered.length === 0 ? d : Buffer.concat([this.buffered, d]);
    const end = this.buffered.indexOf(HEAD_END);
    if (end < 0) return;
    const head = this.buffered.toString('latin1', 0, end);
    const status = Number(head.slice(9, 12));
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!m) {
      this.socket.destroy();
      this.fail(new Error('answer without Content-Length'));
      return;
    }
    const total = end + 4 + Number(m[1]);
    if (this.buffered.length < total) return;
    const body = this.buffered.subarray(end + 4, total);
    this.buffered = this.buffered.subarray(total);
    const w = this.waiter;
    this.waiter = undefined;
    w?.resolve({ status, body });
  }
}

/** The same interface as KeepAliveClient, over at most `sockets` raw connections. */
export class RawHttpClient {
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;

  constructor(baseUrl: string) {
    const u = new URL(baseUrl);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.hostHeader = u.host;
  }

  private open(): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = connect(this.port, this.host);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        const c = new Connection(socket);
        this.all.add(c);
        resolve(c);
      });
      socket.once('error', reject);
    });
  }

  async send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Buffer | undefined,
  ): Promise<HttpAnswer> {
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\nConnection: keep-alive\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    head += `Content-Length: ${body ? body.length : 0}\r\n\r\n`;
    const bytes = body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
    let conn = this.idle.pop();
    while (conn && !conn.usable) conn = this.idle.pop();
    conn ??= await this.open();
    const answer = await conn.send(bytes);
    if (conn.usable) this.idle.push(conn);
    return answer;
  }

  close(): void {
    for (const c of this.all) c.socket.destroy();
    this.all.clear();
    this.idle.length = 0;
  }
}
