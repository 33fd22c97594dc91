/**
 * The Prometheus text format (version 0.0.4), written by hand: it is a few
 * lines per family (# HELP, # TYPE, one line per series), and a client
 * library would add a dependency and a registry of its own to the server.
 * Families come in catalog order; series of a family sorted, so that two
 * scrapes list them alike.
 */
import { FAMILIES } from './catalog.js';
import { familyOf } from './registry.js';

export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

function helpText(help: string): string {
  return help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function number(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** The exposition of `samples` (series -> value); a series of a family not in the catalog is a bug and throws. */
export function renderExposition(samples: Map<string, number>): string {
  const byFamily = new Map<string, Array<[string, number]>>();
  for (const [s, v] of samples) {
    const name = familyOf(s);
    let list = byFamily.get(name);
    if (list === undefined) {
      list = [];
      byFamily.set(name, list);
    }
    list.push([s, v]);
  }
  const lines: string[] = [];
  for (const family of FAMILIES) {
    const list = byFamily.get(family.name);
    byFamily.delete(family.name);
    if (list === undefined) continue;
    lines.push(`# HELP ${family.name} ${helpText(family.help)}`, `# TYPE ${family.name} ${family.type}`);
    list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (const [s, v] of list) lines.push(`${s} ${number(v)}`);
  }
  if (byFamily.size > 0) throw new Error(`metrics not in the catalog: ${[...byFamily.keys()].join(', ')}`);
  return `${lines.join('\n')}\n`;
}
