/** A short, printable rendering of a rejected name, for error messages (never more than 80 characters). */
export function describe(name: unknown): string {
  if (typeof name !== 'string') return `(${typeof name})`;
  const shown = JSON.stringify(name.length > 72 ? `${name.slice(0, 72)}...` : name);
  return name.length === 0 ? '"" (empty)' : shown;
}
