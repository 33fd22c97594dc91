/**
 * `stash env --format dotenv|json|shell`: entries printed for a file or an
 * `eval`, in the forms their readers expect. dotenv parsers (motdotla/dotenv,
 * which `stash run --env-file` uses) take quoted values literally, except
 * that double quotes turn `\n` into a newline, and no quote can be escaped.
 * So each value goes in the first of ' ` " that it does not contain (real
 * newlines are kept inside the quotes), and a value that holds all three, or
 * a carriage return (dotenv folds line endings), is refused with a pointer to
 * --format json. json: one flat object. shell: `export NAME='...'` (a '
 * becomes '\'').
 */
import { StashError } from '../errors.js';
import { writeStdout } from '../output-streams.js';
import { warn } from './output.js';
import { isTerminal } from './terminal.js';

type Values = ReadonlyMap<string, { value: Buffer }>;

function dotenvLine(name: string, value: string): string {
  const quote = value.includes('\r')
    ? undefined
    : ["'", '`', '"'].find((q) => !value.includes(q) && (q !== '"' || !value.includes('\\n')));
  if (quote === undefined) {
    throw new StashError(
      'DOTENV_UNREPRESENTABLE',
      `${name} holds a carriage return or every quote character, which a dotenv file cannot carry exactly; nothing was printed (use --format json)`,
    );
  }
  return `${name}=${quote}${value}${quote}\n`;
}

function shellLine(name: string, value: string): string {
  return `export ${name}='${value.replace(/'/g, "'\\''")}'\n`;
}

export async function printEntries(values: Values, format: 'dotenv' | 'json' | 'shell'): Promise<void> {
  if (isTerminal(1))
    warn('printing secret values to the terminal; redirect to a file (chmod 600) or pipe them instead');
  const names = [...values.keys()].sort();
  if (format === 'json') {
    const obj: Record<string, string> = {};
    for (const n of names) obj[n] = values.get(n)!.value.toString('utf8');
    await writeStdout(`${JSON.stringify(obj, null, 2)}\n`);
    return;
  }
  const line = format === 'dotenv' ? dotenvLine : shellLine;
  // Built whole first, so that a value dotenv cannot carry stops the output before any of it is written.
  const text = names.map((n) => line(n, values.get(n)!.value.toString('utf8'))).join('');
  await writeStdout(text);
}
