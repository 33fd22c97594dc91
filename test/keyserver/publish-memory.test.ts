/**
 * A publish keeps its verification token in secure memory from the process's
 * secure pool, given back zeroed, not in a sodium_malloc buffer of its own:
 * sodium-native 5.1.0 unmaps a freed buffer only when the garbage collector
 * gets to it, so one allocation per publish piles up mappings under load
 * (issue 24; src/native/secure-pool.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { publish } from '../../src/keyserver/client.js';
import { defaultConfig } from '../../src/keyserver/cli/options.js';
import { startServer } from '../../src/keyserver/server.js';
import { securePool } from '../../src/native/secure-pool.js';
import { loadSodium } from '../../src/native/sodium.js';
import { identityPublicKey, MemoryLogger, tempDir } from './harness.js';

test('200 publishes: no sodium_malloc after the first, every token given back to the pool', async () => {
  const dir = tempDir('publish-memory');
  const printed: string[] = [];
  const out = { write: (s: string) => printed.push(s) } as unknown as NodeJS.WritableStream;
  const server = await startServer({
    // Developer mode prints the link instead of running a mail command; no request limits in the way.
    config: {
      ...defaultConfig(),
      bind: { host: '127.0.0.1', port: 0 },
      stateDir: dir.path,
      developer: true,
      rateLimitPerMinute: 0,
      verificationEmailIpRateLimitPerHour: 0,
    },
    logger: new MemoryLogger(),
    console: out,
  });
  const sodium = loadSodium();
  const realMalloc = sodium.sodium_malloc;
  let mallocs = 0;
  try {
    const key = identityPublicKey();
    await publish(server.url, key, 'warm-up@example.org'); // the pool's first buffer of this size
    const inUse = securePool.stats().inUse;
    sodium.sodium_malloc = ((size: number) => {
      mallocs++;
      return realMalloc(size);
    }) as typeof realMalloc;
    for (let i = 0; i < 200; i++)
      assert.is((await publish(server.url, key, `user${i}@example.org`)).verification, 'printed');
    assert.is(mallocs, 0, `sodium_malloc was called ${mallocs} times for 200 publishes`);
    assert.is(securePool.stats().inUse, inUse, 'every token went back to the pool');
    assert.ok(securePool.stats().parkedZero, 'zeroed');
    assert.is(printed.filter((l) => /verification link for/.test(l)).length, 201);
  } finally {
    sodium.sodium_malloc = realMalloc;
    await server.close();
    dir.remove();
  }
});

test.run();
