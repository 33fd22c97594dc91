/**
 * Seeded randomness for fuzz tests, so that a failure can be replayed: a
 * small generator (mulberry32) and the seed a run uses, taken from
 * STASH_TEST_SEED when set, else drawn at random. A test prints the seed in
 * its failure message; `STASH_TEST_SEED=<seed> node test/run.js <suite>`
 * then runs the same cases again.
 */
import { randomInt } from 'node:crypto';

/** mulberry32: numbers in [0, 1) from a 32-bit seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** STASH_TEST_SEED (a decimal 32-bit integer) when set, else a random seed. */
export function testSeed(env: NodeJS.ProcessEnv = process.env): number {
  const given = env.STASH_TEST_SEED;
  if (given === undefined || given === '') return randomInt(2 ** 32);
  if (!/^[0-9]+$/.test(given) || Number(given) >= 2 ** 32)
    throw new Error(`STASH_TEST_SEED must be a decimal integer below 2^32 (got ${JSON.stringify(given)})`);
  return Number(given);
}

/** `length` bytes from `rand`. */
export function seededBytes(rand: () => number, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) out[i] = Math.floor(rand() * 256);
  return out;
}
