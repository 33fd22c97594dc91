// Reads what one suite printed into the figures test/run.js adds up. uvu counts a test
// that returned early as passed, so a test that found a facility missing and printed
// "SKIP: <what>: <reason>" (test/helpers/facility.ts) is taken back out of the passed
// count and counted as skipped. The marker is looked for anywhere on a line: uvu prints
// its progress dots without a newline, so a skip's line often reads "• • SKIP: ...".

/** How many skip markers `output` holds: "SKIP: " at the start of a word, anywhere on a line. */
export function countSkipMarkers(output) {
  return (output.match(/(?<![\w(])SKIP: /g) ?? []).length;
}

/**
 * The result of a suite from its output and exit: `ok` when it exited 0, ran at least one
 * test and every test passed or was skipped; `passed` excludes the tests that printed a skip
 * marker; `skipped` adds uvu's own skips (test.skip) to the markers.
 */
export function suiteResult(output, code, signal) {
  const num = (label) => Number((output.match(new RegExp(`${label}:\\s+(\\d+)`)) ?? [])[1] ?? 0);
  const total = num('Total');
  const uvuPassed = num('Passed');
  const uvuSkipped = num('Skipped');
  const markers = Math.min(countSkipMarkers(output), uvuPassed);
  const ok = code === 0 && signal === null && total > 0 && uvuPassed + uvuSkipped === total;
  return { ok, total, passed: uvuPassed - markers, skipped: uvuSkipped + markers };
}
