/**
 * Reads the ExecStart= and Environment= lines of a generated unit the way
 * systemd splits them (words separated by spaces; a word may be quoted
 * whole with "..." and backslash escapes), so a test can run exactly what
 * the unit would run.
 */

/** systemd's word splitting for ExecStart= and Environment= (the subset the generated unit uses). */
export function systemdWords(line: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < line.length) {
    while (line[i] === ' ') i++;
    if (i >= line.length) break;
    let word = '';
    if (line[i] === '"') {
      i++;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === '\\' && i + 1 < line.length) i++;
        word += line[i++];
      }
      if (line[i] !== '"') throw new Error(`unterminated quote in: ${line}`);
      i++;
    } else {
      while (i < line.length && line[i] !== ' ') word += line[i++];
    }
    words.push(word);
  }
  return words;
}

/** The words of every `KEY=` line of the unit (one list per line). */
export function unitLines(unit: string, key: string): string[][] {
  return unit
    .split('\n')
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => systemdWords(l.slice(key.length + 1)));
}

/** ExecStart=: the program and its arguments. */
export function execStart(unit: string): string[] {
  const lines = unitLines(unit, 'ExecStart');
  if (lines.length !== 1) throw new Error(`expected one ExecStart= line, found ${lines.length}`);
  return lines[0]!;
}

/** Every Environment= assignment of the unit, as an environment. */
export function unitEnvironment(unit: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const words of unitLines(unit, 'Environment')) {
    for (const w of words) {
      const at = w.indexOf('=');
      if (at <= 0) throw new Error(`not an assignment: ${w}`);
      env[w.slice(0, at)] = w.slice(at + 1);
    }
  }
  return env;
}
