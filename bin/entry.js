// Shared by the two executables: load the compiled main module and run it.
// A missing dist/ (TypeScript not compiled) gets a clear message, not a stack.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function runEntry(relative, base) {
  const url = new URL(relative, base);
  if (!existsSync(fileURLToPath(url))) {
    process.stderr.write(
      `stash: ${fileURLToPath(url)} is missing: the TypeScript sources are not compiled. ` +
        'Run `npm install` (or `npm run compile`) in the package folder.\n',
    );
    process.exit(70);
  }
  import(url.href).then(
    (mod) => mod.main(process.argv.slice(2)),
    (err) => {
      process.stderr.write(`stash: failed to start: ${err && err.message ? err.message : err}\n`);
      process.exit(70);
    },
  );
}
