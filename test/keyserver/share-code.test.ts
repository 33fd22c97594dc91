import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  CODE_LENGTH,
  CROCKFORD_ALPHABET,
  LOCATOR_ALPHABET,
  generateShareCode,
  parseShareCode,
} from '../../src/keyserver/share-code.js';

function isTypo(input: string): boolean {
  try {
    parseShareCode(input);
    return false;
  } catch (err) {
    assert.is((err as { code?: string }).code, 'CODE_TYPO', input);
    return true;
  }
}

const samples = [
  generateShareCode(0, 1, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])),
  generateShareCode(31, 0, new Uint8Array(12).fill(255)),
  generateShareCode(9, 18, new Uint8Array(12)),
  generateShareCode(3, 4),
];

test('generated codes have the documented shape and parse back', () => {
  for (const c of samples) {
    assert.is(c.canonical.length, CODE_LENGTH);
    assert.match(c.display, /^[0-9A-V]{2}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]$/);
    assert.equal(parseShareCode(c.display), c);
    assert.equal(parseShareCode(c.canonical.toLowerCase()), c);
    assert.equal(parseShareCode(` ${c.display.replace(/-/g, ' ')} `), c);
  }
  const c = samples[1]!;
  assert.is(c.primary, 31);
  assert.is(c.secondary, 0);
  assert.ok(c.display.startsWith('V0-'));
  assert.is(parseShareCode('0A-7K3M-9QXD-W2HF-Z').primary, 0);
  assert.is(parseShareCode('0A-7K3M-9QXD-W2HF-Z').secondary, 10);
});

test('the locator names the primary and the secondary (0-9 then a-v)', () => {
  for (let p = 0; p < 32; p++) {
    const c = generateShareCode(p, (p + 1) % 32);
    assert.is(c.canonical[0], LOCATOR_ALPHABET[p]!.toUpperCase());
    const back = parseShareCode(c.display);
    assert.is(back.primary, p);
    assert.is(back.secondary, (p + 1) % 32);
  }
  assert.throws(() => generateShareCode(32, 0), /out of range/);
});

test('Crockford aliases in the random part read as the same code; U is refused', () => {
  const base = generateShareCode(2, 3, new Uint8Array([1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0]));
  const r = base.canonical;
  // Random part is made only of 0 and 1: fold every 1 to I or L and every 0 to O.
  const aliased =
    r.slice(0, 2) + [...r.slice(2, 14)].map((ch, i) => (ch === '1' ? (i % 2 ? 'i' : 'L') : 'o')).join('') + r.slice(14);
  assert.equal(parseShareCode(aliased), base);
  assert.ok(isTypo(`${r.slice(0, 5)}U${r.slice(6)}`));
});

test('every single-character substitution is reported as a typo', () => {
  let checked = 0;
  for (const sample of samples) {
    const code = sample.canonical;
    for (let pos = 0; pos < CODE_LENGTH; pos++) {
      const alphabet = pos < 2 ? LOCATOR_ALPHABET.toUpperCase() : `${CROCKFORD_ALPHABET}ILOU`;
      for (const ch of alphabet + alphabet.toLowerCase()) {
        const typed = code.slice(0, pos) + ch + code.slice(pos + 1);
        let same = false;
        try {
          same = parseShareCode(typed).canonical === code;
        } catch {
          same = false;
        }
        if (same) continue; // a case change or a Crockford alias of the same symbol
        assert.ok(isTypo(typed), `substitution at ${pos} by ${ch} in ${code} not detected`);
        checked++;
      }
    }
  }
  assert.ok(checked > samples.length * CODE_LENGTH * 30, `only ${checked} substitutions checked`);
});

test('every adjacent transposition of different symbols is reported as a typo', () => {
  for (let n = 0; n < 200; n++) {
    const code = generateShareCode(n % 10, (n + 1) % 10).canonical;
    for (let pos = 2; pos < CODE_LENGTH - 1; pos++) {
      if (code[pos] === code[pos + 1]) continue;
      const typed = code.slice(0, pos) + code[pos + 1] + code[pos] + code.slice(pos + 2);
      assert.ok(isTypo(typed), `transposition at ${pos} in ${code}`);
    }
  }
});

test('wrong length, strange characters and huge input: a typo with a clear message', () => {
  const code = samples[0]!.display;
  assert.throws(() => parseShareCode(code.slice(0, -1)), /has 14 characters instead of 15/);
  assert.throws(() => parseShareCode(`${code}7`), /has 16 characters instead of 15/);
  assert.throws(() => parseShareCode(''), /has 0 characters/);
  assert.throws(() => parseShareCode(`${code.slice(0, 4)}!${code.slice(5)}`), /character 4 \("!"\) is not used there/);
  assert.throws(() => parseShareCode(`W${code.slice(1)}`), /character 1 \("W"\) is not used there \(0-9 and A-V\)/);
  assert.throws(() => parseShareCode('x'.repeat(1000)), /too long for a share code/);
  const wrongCheck = code.endsWith('Q') ? 'R' : 'Q';
  assert.throws(() => parseShareCode(code.slice(0, -1) + wrongCheck), /this share code has a typo/);
  for (const bad of [code.slice(0, -1), 'x'.repeat(1000), '']) assert.ok(isTypo(bad));
  // Letters whose case mapping lands on ASCII (Kelvin sign -> k, dotless i -> I) are not symbols.
  assert.throws(() => parseShareCode(`0\u212a${code.slice(2)}`), /character 2 \("\u212a"\) is not used there/);
  assert.throws(
    () => parseShareCode(`${code.slice(0, 3)}\u0131${code.slice(4)}`),
    /character 3 \("\u0131"\) is not used there/,
  );
});

test('random parts are spread out: 5000 codes, no repeats, every symbol used at every position', () => {
  const seen = new Set<string>();
  const perPosition = Array.from({ length: 12 }, () => new Set<string>());
  for (let i = 0; i < 5000; i++) {
    const c = generateShareCode(0, 1).canonical;
    seen.add(c);
    for (let p = 0; p < 12; p++) perPosition[p]!.add(c[2 + p]!);
  }
  assert.is(seen.size, 5000);
  for (const s of perPosition) assert.is(s.size, 32);
});

test.run();
