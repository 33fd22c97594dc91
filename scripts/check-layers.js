#!/usr/bin/env node
// Checks the shape of src/ that docs/architecture.md describes, with the TypeScript
// compiler's parser (no type checking: about 3 s of CPU for the tree):
//   - each folder imports only the folders LAYERS allows it (type imports included: a
//     type that climbs a layer is a dependency all the same);
//   - no cycle among value imports (`import type` and `{ type X }` specifiers are left
//     out, since esbuild erases them; a dynamic `import()` counts, see below);
//   - no function (declaration, method, arrow, function expression) longer than
//     MAX_FUNCTION_LINES lines, but for those in LONG_FUNCTIONS.
// Each problem is printed as `file:line: message`; the exit status is 1 when there is any.
//   node scripts/check-layers.js [ROOT]      (ROOT: the checkout, by default this one)
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

// typescript 5 (a devDependency; 7 has no compiler API) through require(): an ES import of
// this 9 MB CommonJS file makes Node scan it for export names first, 0.5 s of CPU a run.
const ts = createRequire(import.meta.url)('typescript');

/**
 * What each part of src/ may import besides itself, type imports included (a type that
 * climbs a layer is a dependency all the same). A part is a folder of src/, or `shared`
 * for the files directly in src/ (errors.ts, output-streams.ts, process-state.ts,
 * version.ts). The flow runs one way, protocol -> agent -> cli, with the key server
 * apart (docs/architecture.md). Each list is as short as the code allows: a new edge
 * is a decision, made here and in docs/architecture.md together.
 */
const LAYERS = {
  shared: [],
  native: ['shared'],
  protocol: ['shared', 'native'],
  vault: ['shared', 'native'],
  config: ['shared', 'vault'],
  agent: ['shared', 'native', 'protocol', 'config'],
  keyserver: ['shared', 'native', 'vault', 'config'],
  cli: ['shared', 'native', 'protocol', 'vault', 'config', 'agent', 'keyserver'],
};

/*
 * Value-import cycles: an `import type` or a `{ type X }` specifier is no edge (esbuild
 * erases it), but a dynamic import() is one. It runs the module as a static import
 * does, only later, and a module it loads that imports the loader back is the same
 * tangle: the one such cycle (agent/transport.ts loading transport-net.ts and
 * transport-blocking.ts, which imported AgentError back from it) was broken
 * (agent-error.ts) rather than excused, and none is left.
 */

const MAX_FUNCTION_LINES = 80;

/**
 * The functions longer than MAX_FUNCTION_LINES when this check was written: file, name
 * (as the messages print it) and the length it had, which it may not exceed. This list
 * must only shrink: split a function, then take its line out (the check fails on a line
 * whose function is gone or no longer too long, in a file that still exists). Never add
 * a line, and never raise a length.
 */
const LONG_FUNCTIONS = [];

/** The part of src/ a file (relative to src/, with `/`) belongs to. */
function partOf(file) {
  const slash = file.indexOf('/');
  return slash < 0 ? 'shared' : file.slice(0, slash);
}

/** The .ts files under `dir`, relative to it, with `/` separators. */
function sourceFiles(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) =>
      relative(dir, join(e.parentPath ?? e.path, e.name))
        .split(sep)
        .join('/'),
    )
    .sort();
}

/** The src-relative file a relative specifier names (`./x.js` is x.ts), or null for a package or a missing file. */
function resolveSpecifier(srcDir, from, specifier) {
  if (!specifier.startsWith('.')) return null;
  const base = resolve(srcDir, dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (candidate.endsWith('.ts') && existsSync(candidate)) return relative(srcDir, candidate).split(sep).join('/');
  }
  return null;
}

/** Whether an import or export declaration brings in types only (erased when compiled). */
function typeOnly(node) {
  if (ts.isImportDeclaration(node)) {
    const clause = node.importClause;
    if (!clause) return false; // `import './x.js'` runs the module
    if (clause.isTypeOnly) return true;
    if (clause.name) return false;
    const bindings = clause.namedBindings;
    return !!bindings && ts.isNamedImports(bindings) && bindings.elements.every((e) => e.isTypeOnly);
  }
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return !!clause && ts.isNamedExports(clause) && clause.elements.every((e) => e.isTypeOnly);
}

/** The name a function is known by in messages and in LONG_FUNCTIONS. */
function functionName(node, sourceFile) {
  const text = (n) => (n && (ts.isIdentifier(n) || ts.isStringLiteral(n) || ts.isPrivateIdentifier(n)) ? n.text : null);
  const owner = (n) => {
    const cls = n.parent;
    return cls && (ts.isClassLike(cls) || ts.isObjectLiteralExpression(cls)) && cls.name ? `${cls.name.text}.` : '';
  };
  if (ts.isConstructorDeclaration(node)) return `${owner(node)}constructor`;
  if (node.name && text(node.name)) return `${owner(node)}${text(node.name)}`;
  const parent = node.parent;
  if (
    (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) &&
    text(parent.name)
  )
    return `${ts.isPropertyDeclaration(parent) ? owner(parent) : ''}${text(parent.name)}`;
  // An anonymous callback: named after the call it is given to, inside its enclosing function.
  let outer = parent;
  while (outer && !ts.isFunctionLike(outer)) outer = outer.parent;
  const where = outer ? `${functionName(outer, sourceFile)} > ` : '';
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent)) {
    const callee = parent.expression.getText(sourceFile).replace(/\s+/g, '');
    return `${where}${ts.isNewExpression(parent) ? 'new ' : ''}${callee.slice(0, 40)} callback`;
  }
  return `${where}(anonymous)`;
}

const FUNCTION_KINDS = new Set([
  ts.SyntaxKind.FunctionDeclaration,
  ts.SyntaxKind.MethodDeclaration,
  ts.SyntaxKind.Constructor,
  ts.SyntaxKind.GetAccessor,
  ts.SyntaxKind.SetAccessor,
  ts.SyntaxKind.ArrowFunction,
  ts.SyntaxKind.FunctionExpression,
]);

/** One file's imports ({ to, line, value }) and its functions over the limit ({ name, line, lines }). */
function scan(srcDir, file) {
  const text = readFileSync(join(srcDir, file), 'utf8');
  const sourceFile = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const lineOf = (pos) => sourceFile.getLineAndCharacterOfPosition(pos).line + 1;
  const imports = [];
  const long = [];
  const visit = (node) => {
    let specifier = null;
    let value = true;
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      specifier = node.moduleSpecifier;
      value = !typeOnly(node);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      specifier = node.arguments[0];
    } else if (ts.isImportTypeNode(node)) {
      // `typeof import('./x.js')` in a type
      const arg = node.argument;
      specifier = ts.isLiteralTypeNode(arg) ? arg.literal : null;
      value = false;
    }
    if (specifier && ts.isStringLiteralLike(specifier)) {
      const to = resolveSpecifier(srcDir, file, specifier.text);
      if (to) imports.push({ to, line: lineOf(node.getStart(sourceFile)), value });
    }
    if (FUNCTION_KINDS.has(node.kind) && node.body) {
      const first = lineOf(node.getStart(sourceFile));
      const lines = lineOf(node.getEnd()) - first + 1;
      if (lines > MAX_FUNCTION_LINES) long.push({ name: functionName(node, sourceFile), line: first, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return { imports, long };
}

/** The strongly connected components of more than one file (or a file importing itself), by Tarjan. */
function cycles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let next = 0;
  const connect = (v) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const { to: w } of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).some((e) => e.to === v)) found.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) connect(v);
  return found;
}

/** One shortest way round a component, from its first file: [{ from, to, line }, ...]. */
function loopThrough(graph, component) {
  const members = new Set(component);
  const start = component[0];
  const via = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const edge of graph.get(v) ?? []) {
      if (!members.has(edge.to) || via.has(edge.to)) continue;
      via.set(edge.to, { from: v, ...edge });
      if (edge.to === start) queue.length = 0;
      else queue.push(edge.to);
    }
  }
  const path = [];
  let at = start;
  do {
    const edge = via.get(at);
    path.unshift(edge);
    at = edge.from;
  } while (at !== start);
  return path;
}

/** The layer problems of one file's imports. */
function layerProblems(file, imports) {
  const from = partOf(file);
  const may = LAYERS[from];
  if (!may)
    return [`src/${file}:1: src/${from} is not in the LAYERS table of scripts/check-layers.js: say what it may import`];
  const problems = [];
  for (const { to, line } of imports) {
    const target = partOf(to);
    if (target !== from && !may.includes(target))
      problems.push(
        `src/${file}:${line}: ${from} imports src/${to}; ${from} may import only ${may.join(', ') || 'itself'}`,
      );
  }
  return problems;
}

/** The line of this script that lists `file` and `name` in LONG_FUNCTIONS (1 when not found). */
function listLine(file, name) {
  const lines = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n');
  const at = lines.findIndex((l) => l.includes(`'${file}'`) && l.includes(`'${name}'`));
  return at + 1 || 1;
}

/** Every problem in ROOT/src, as `file:line: message` lines. */
export function checkLayers(root) {
  const srcDir = join(root, 'src');
  const problems = [];
  const valueGraph = new Map();
  const longSeen = new Set();
  const allowed = new Map(LONG_FUNCTIONS.map(([file, name, most]) => [`${file}\0${name}`, most]));
  for (const file of sourceFiles(srcDir)) {
    const { imports, long } = scan(srcDir, file);
    problems.push(...layerProblems(file, imports));
    valueGraph.set(
      file,
      imports.filter((i) => i.value),
    );
    for (const { name, line, lines } of long) {
      const key = `src/${file}\0${name}`;
      const most = allowed.get(key);
      if (most !== undefined) longSeen.add(key);
      if (most === undefined)
        problems.push(`src/${file}:${line}: ${name} is ${lines} lines; split it below ${MAX_FUNCTION_LINES + 1}`);
      else if (lines > most)
        problems.push(
          `src/${file}:${line}: ${name} is ${lines} lines, longer than the ${most} LONG_FUNCTIONS allows it; split it below ${MAX_FUNCTION_LINES + 1}`,
        );
    }
  }
  for (const component of cycles(valueGraph)) {
    const path = loopThrough(valueGraph, component);
    const round = [path[0].from, ...path.map((e) => e.to)].map((f) => `src/${f}`).join(' -> ');
    const more = component.length > path.length ? ` (${component.length} files in the cycle)` : '';
    problems.push(`src/${path[0].from}:${path[0].line}: value-import cycle: ${round}${more}`);
  }
  // An entry whose file is not in this tree is left alone: a test checks a small tree with none of them.
  for (const [file, name] of LONG_FUNCTIONS) {
    if (longSeen.has(`${file}\0${name}`) || !existsSync(join(root, file))) continue;
    problems.push(
      `scripts/check-layers.js:${listLine(file, name)}: ${file}: ${name} is no longer over ${MAX_FUNCTION_LINES} lines; take it out of LONG_FUNCTIONS`,
    );
  }
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
  const problems = checkLayers(root);
  for (const p of problems) console.log(p);
  process.exitCode = problems.length > 0 ? 1 : 0;
}
