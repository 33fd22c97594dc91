/**
 * `stash env --format dotenv|json|shell`: entries printed for a file or an
 * `eval`, in the forms their readers expect. dotenv parsers (motdotla/dotenv,
 * which `stash run --env-file` uses) take quoted values literally, except
 * that double quotes turn `\n` into a newline, and no quote can be escaped.
 * So each value goes in the first of ' ` " that it does not contain (real
 * newlines are kept inside the quotes), and a value that holds all three, or
 * a carriage return (dotenv folds line endings), is refused with a pointer to
 * --format json. json: one flat object. shell: `export NAME='...'` (a '
 * becomes '\''). A value that is not UTF-8, or a NUL byte in a shell line,
 * would be printed changed: refused (env-value.ts).
 */
import { StashError } from '../errors.js';
import { writeStdout } from '../output-streams.js';
import { fileAdvice, textUnfit, unfitError } from './env-value.js';
import { warn } from './output.js';
import { isTerminal } from './terminal.js';

type Values = ReadonlyMap<string, { container: string; value: Buffer }>;
type Format = 'dotenv' | 'json' | 'shell';

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

/**
 * The value of `name` as text, or a refusal when the format would print it
 * changed: bytes that are not UTF-8 (any format: each is read back as UTF-8
 * text), or a NUL byte in a shell line (the shell drops it without a word;
 * JSON escapes it and dotenv keeps it).
 */
function text(values: Values, name: string, format: Format): string {
  const { container, value } = values.get(name)!;
  const unfit = textUnfit(value, format !== 'shell');
  if (unfit !== null)
    throw unfitError(
      unfit,
      `the value of ${name} in ${container}`,
      `--format ${format}`,
      unfit === 'nul'
        ? 'nothing was printed (use --format json)'
        : `nothing was printed (stash get ${container} ${name} prints its bytes; or ${fileAdvice(name, `stash://${container}/${name}`)})`,
    );
  return value.toString('utf8');
}

export async function printEntries(values: Values, format: Format): Promise<void> {
  if (isTerminal(1))
    warn('printing secret values to the terminal; redirect to a file (chmod 600) or pipe them instead');
  const names = [...values.keys()].sort();
  // Built whole first, so that a value the format cannot carry stops the output before any of it is written.
  if (format === 'json') {
    const obj: Record<string, string> = {};
    for (const n of names) obj[n] = text(values, n, format);
    await writeStdout(`${JSON.stringify(obj, null, 2)}\n`);
    return;
  }
  const line = format === 'dotenv' ? dotenvLine : shellLine;
  await writeStdout(names.map((n) => line(n, text(values, n, format))).join(''));
}
