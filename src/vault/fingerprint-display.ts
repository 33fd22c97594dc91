/**
 * Fingerprints laid out for reading aloud: the canonical form on one line,
 * then the six groups numbered, so two people on a phone can say "group 4:
 * H8RW" and know where they are. Pure, with no imports: the CLI prints it and
 * the key server's pages show it (beside fingerprint-format.ts, which makes
 * the canonical form), so both lay a fingerprint out the same way.
 */

/** Lines showing a formatted fingerprint ("XXXX-XXXX-...") for people. */
export function fingerprintLines(fingerprint: string, indent = '  '): string[] {
  const groups = fingerprint.split('-');
  const half = Math.ceil(groups.length / 2);
  const lines: string[] = [];
  for (let i = 0; i < half; i++) {
    const left = `${i + 1}  ${groups[i] ?? ''}`;
    const j = i + half;
    const right = j < groups.length ? `${j + 1}  ${groups[j]}` : '';
    lines.push(`${indent}${left.padEnd(12)}${right}`.trimEnd());
  }
  return lines;
}
