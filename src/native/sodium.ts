/**
 * sodium-native, loaded on first call by require(), not by an ES import:
 * importing a CommonJS package from an ES module makes Node lex its 108 KB
 * index.js for export names, about 10 ms of every CLI start
 * (docs/benchmarks.md). The CLI bundle (scripts/bundle-cli.js) carries
 * sodium-native's JavaScript itself, so that it is compiled once into the
 * code cache; the bundler swaps this module for a plain require() of that
 * copy. Every module of the CLI gets sodium here, so there is one copy.
 */
import { createRequire } from 'node:module';

type SodiumNative = typeof import('sodium-native');

let loaded: SodiumNative | undefined;

/** The sodium-native module (its native addon is opened on the first call). */
export function loadSodium(): SodiumNative {
  loaded ??= createRequire(import.meta.url)('sodium-native') as SodiumNative;
  return loaded;
}
