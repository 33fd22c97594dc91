/**
 * "Did you mean ...?" for mistyped words: commands, options, container and
 * entry names. One rule everywhere: a candidate that differs only in case
 * wins, else the closest by edit distance within a small bound.
 */

/** Edit distance of two short words (insertions, deletions, substitutions). */
export function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length]!;
}

/**
 * The candidate closest to `word`: one equal but for case first, else the
 * nearest within `maxDistance` edits (and fewer edits than the word has
 * characters, so `x` suggests nothing). Null when nothing is close.
 */
export function nearest(word: string, candidates: Iterable<string>, maxDistance = 2): string | null {
  const list = [...candidates];
  const lower = word.toLowerCase();
  const sameButCase = list.find((c) => c !== word && c.toLowerCase() === lower);
  if (sameButCase !== undefined) return sameButCase;
  let best: string | null = null;
  let bestDistance = Math.min(maxDistance + 1, word.length);
  for (const c of list) {
    if (c === word) continue;
    const d = distance(lower, c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** `; did you mean X?` or '' (for the end of an error message). */
export function didYouMean(word: string, candidates: Iterable<string>, quote = (s: string): string => s): string {
  const guess = nearest(word, candidates);
  return guess === null ? '' : `; did you mean ${quote(guess)}?`;
}
