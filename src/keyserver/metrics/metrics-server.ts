/**
 * `--metrics-bind ADDR`: GET /metrics on an address of its own (plain HTTP,
 * in the store's process), for a Prometheus that scrapes from another host
 * over a private network. It answers /metrics to whoever reaches it and
 * nothing else; the main address keeps serving /metrics to loopback only.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StashError } from '../../errors.js';
import type { BindAddress } from '../server-config.js';
import type { Logger } from '../logger.js';
import { EXPOSITION_CONTENT_TYPE } from './exposition.js';
import type { ProcessMetrics } from './process-metrics.js';

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

function plain(
  res: import('node:http').ServerResponse,
  status: number,
  text: string,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    ...extra,
  });
  res.end(text);
}

/** Listens on `bind`; resolves once bound (a port in use is an error naming the option). */
export async function startMetricsServer(
  bind: BindAddress,
  render: () => Promise<string>,
  metrics: ProcessMetrics,
  logger: Logger,
): Promise<MetricsServer> {
  const server: Server = createServer(
    { requestTimeout: 10_000, headersTimeout: 5_000, keepAliveTimeout: 5_000 },
    metrics.countRequests((req, res) => {
      const path = (req.url ?? '').split('?', 1)[0];
      if (path !== '/metrics') return plain(res, 404, 'not found: this address serves GET /metrics only\n');
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return plain(res, 405, 'GET /metrics only\n', { Allow: 'GET, HEAD' });
      render().then(
        (text) => {
          res.writeHead(200, {
            'Content-Type': EXPOSITION_CONTENT_TYPE,
            'Cache-Control': 'no-store',
            'Content-Length': Buffer.byteLength(text),
          });
          res.end(req.method === 'HEAD' ? undefined : text);
        },
        (err: unknown) => {
          logger.error(`metrics: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
          plain(res, 500, 'internal error; see the server log\n');
        },
      );
    }),
  );
  try {
    await new Promise<void>((ok, fail) => {
      server.once('error', fail);
      server.listen(bind.port, bind.host, () => {
        server.off('error', fail);
        ok();
      });
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'LISTEN_FAILED';
    throw new StashError(code, `--metrics-bind ${bind.host}:${bind.port}: cannot listen: ${(err as Error).message}`);
  }
  server.on('error', (err) => logger.error(`metrics server: ${err.message}`));
  const port = (server.address() as AddressInfo).port;
  const host = bind.host.includes(':') ? `[${bind.host}]` : bind.host;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}
