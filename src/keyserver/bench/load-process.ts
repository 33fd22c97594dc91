/**
 * The load generator process (forked by load-driver.ts): receives a plan,
 * optionally pins itself to a CPU with taskset, runs the closed loop against
 * the server and sends back counts and histograms. Holds no secret beyond the
 * throwaway verification links of a benchmark server.
 */
import { execFileSync } from 'node:child_process';
import type { LoadPlan, LoadSummary, ToChild, ToParent } from './load-driver.js';
import { LatencyHistogram } from './histogram.js';
import { KeepAliveClient, runLoad } from './load.js';
import { RawHttpClient } from './raw-client.js';
import { benchEmail, createBody, createdCode, fetchBody, shareHeaders } from './requests.js';
import { performance } from 'node:perf_hooks';

function send(msg: ToParent, then?: () => void): void {
  process.send!(msg, undefined, undefined, () => then?.());
}

/** Links pushed before their flow asked (the answer to a publish can overtake its mail's batch). */
const arrived = new Map<string, string>();
/** Flows waiting for their link, by address; settling one removes it. */
const waiters = new Map<string, { resolve: (path: string) => void; reject: (err: Error) => void }>();

function linksArrived(links: Array<[string, string]>): void {
  for (const [email, path] of links) {
    const waiter = waiters.get(email);
    if (waiter) waiter.resolve(path);
    else arrived.set(email, path);
  }
}

/** How long a flow waits for its link; links come within milliseconds of the publish's answer. */
const LINK_WAIT_MS = 5_000;
/** Set once a link did not come: every flow waiting or still to wait fails at once, not after its own wait. */
let linksFailed: Error | undefined;

/** The link mailed to `email`; rejects when none came within LINK_WAIT_MS, and from then on at once. */
function linkFor(email: string): Promise<string> {
  const path = arrived.get(email);
  if (path !== undefined) {
    arrived.delete(email);
    return Promise.resolve(path);
  }
  if (linksFailed) return Promise.reject(linksFailed);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      linksFailed = new Error(`no verification link was mailed within ${LINK_WAIT_MS / 1000} s of the publish`);
      for (const waiter of [...waiters.values()]) waiter.reject(linksFailed);
    }, LINK_WAIT_MS);
    const done = (): void => {
      clearTimeout(timer);
      waiters.delete(email);
    };
    waiters.set(email, {
      resolve: (p) => {
        done();
        resolve(p);
      },
      reject: (err) => {
        done();
        reject(err);
      },
    });
  });
}

function pin(cpu: number): void {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' });
  } catch {
    /* no taskset, or that CPU does not exist: run unpinned */
  }
}

type Client = KeepAliveClient | RawHttpClient;
type Steps = Record<'publish' | 'confirm' | 'fetch', LatencyHistogram>;
/** The sizes of the last request and answer, for the report. */
interface Sizes {
  requestBytes: number;
  responseBytes: number;
}

/** Sends one request of a flow, its latency recorded in `h`; an answer other than `status` throws. */
async function timed(
  client: Client,
  h: LatencyHistogram,
  status: number,
  method: string,
  path: string,
  hdrs: Record<string, string>,
  body: Buffer | undefined,
) {
  const t0 = performance.now();
  const res = await client.send(method, path, hdrs, body);
  h.record((performance.now() - t0) * 1000);
  if (res.status !== status)
    throw new Error(`HTTP ${res.status} from ${method} ${path.replace(/\/verify\/.*/, '/verify/…')}`);
  return res;
}

/** The operation `i` of the plan's mode: resolves with whether it succeeded; records sizes and, asked, the codes. */
function operationOf(
  plan: LoadPlan,
  client: Client,
  steps: Steps,
  sizes: Sizes,
  codes: string[] | undefined,
): (i: number) => Promise<boolean> {
  const keys = plan.keys.map((k) => Buffer.from(k, 'base64'));
  const headers = shareHeaders(plan.payloadBytes);
  const fetchBodies = plan.codes.map((c) => fetchBody(c, plan.payloadBytes));
  const rawBody = plan.raw ? Buffer.from(plan.raw.body, 'base64') : undefined;
  return async (i: number): Promise<boolean> => {
    switch (plan.mode) {
      case 'raw': {
        const res = await client.send('POST', plan.raw!.path, { 'Content-Type': plan.raw!.contentType }, rawBody);
        sizes.requestBytes = rawBody!.length;
        sizes.responseBytes = res.body.length;
        return res.status === 200;
      }
      case 'fetch': {
        const body = fetchBodies[i % fetchBodies.length]!;
        const res = await client.send('POST', '/v1/share', headers, body);
        sizes.requestBytes = body.length;
        sizes.responseBytes = res.body.length;
        return res.status === 200;
      }
      case 'publish': {
        const body = createBody(keys[i % keys.length]!, benchEmail(i % 1000), plan.payloadBytes);
        const res = await client.send('POST', '/v1/share', headers, body);
        sizes.requestBytes = body.length;
        sizes.responseBytes = res.body.length;
        if (res.status === 201 && codes) codes.push(createdCode(res.body, plan.payloadBytes));
        return res.status === 201;
      }
      case 'confirm': {
        const res = await client.send('POST', plan.paths![i % plan.paths!.length]!, {}, undefined);
        sizes.responseBytes = res.body.length;
        return res.status === 200;
      }
      case 'flow': {
        const email = benchEmail(i);
        const body = createBody(keys[i % keys.length]!, email, plan.payloadBytes);
        const created = await timed(client, steps.publish, 201, 'POST', '/v1/share', headers, body);
        const code = createdCode(created.body, plan.payloadBytes);
        const link = await linkFor(email);
        await timed(client, steps.confirm, 200, 'POST', link, {}, undefined);
        const fetchedBody = fetchBody(code, plan.payloadBytes);
        const fetched = await timed(client, steps.fetch, 200, 'POST', '/v1/share', headers, fetchedBody);
        sizes.requestBytes = body.length;
        sizes.responseBytes = fetched.body.length;
        return true;
      }
    }
  };
}

async function run(plan: LoadPlan): Promise<LoadSummary> {
  if (plan.cpu !== undefined) pin(plan.cpu);
  const client =
    plan.client === 'node-http' ? new KeepAliveClient(plan.url, plan.concurrency) : new RawHttpClient(plan.url);
  const steps: Steps = {
    publish: new LatencyHistogram(),
    confirm: new LatencyHistogram(),
    fetch: new LatencyHistogram(),
  };
  const sizes: Sizes = { requestBytes: 0, responseBytes: 0 };
  const codes: string[] | undefined = plan.collectCodes ? [] : undefined;
  const operation = operationOf(plan, client, steps, sizes, codes);
  const cpuBefore = process.cpuUsage();
  try {
    const result = await runLoad({
      total: plan.total,
      concurrency: plan.concurrency,
      run: operation,
      ...(plan.progress ? { onProgress: (done: number) => send({ type: 'progress', done }) } : {}),
    });
    const cpu = process.cpuUsage(cpuBefore);
    return {
      requests: result.requests,
      errors: result.errors,
      seconds: result.seconds,
      histogram: result.histogram.toData(),
      steps: plan.mode === 'flow' ? Object.fromEntries(Object.entries(steps).map(([k, h]) => [k, h.toData()])) : {},
      firstError: result.firstError,
      cpuMicros: cpu.user + cpu.system,
      responseBytes: sizes.responseBytes,
      requestBytes: sizes.requestBytes,
      ...(codes ? { codes } : {}),
    };
  } finally {
    client.close();
  }
}

process.on('message', (raw) => {
  const msg = raw as ToChild;
  if (msg.type === 'links') {
    linksArrived(msg.links);
    return;
  }
  run(msg.plan).then(
    (summary) => send({ type: 'done', summary }, () => process.exit(0)),
    (err: unknown) =>
      send({ type: 'failed', message: err instanceof Error ? err.message : String(err) }, () => process.exit(1)),
  );
});
process.on('disconnect', () => process.exit(0));
