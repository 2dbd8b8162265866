/**
 * A strict reader of the Prometheus text exposition format 0.0.4 for tests: every line must be a
 * HELP, a TYPE or a sample of the family last declared; label values may only use the three
 * escapes (\\, \", \n); values are Go floats. Throws naming the line on the first violation.
 */
export interface ParsedFamily {
  readonly help: string;
  readonly type: string;
  readonly samples: Array<{ labels: Record<string, string>; value: number }>;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
const VALUE = '(?:[+-]?(?:\\d+\\.?\\d*(?:[eE][+-]?\\d+)?|\\.\\d+(?:[eE][+-]?\\d+)?)|NaN|[+-]Inf)';
const LABEL_VALUE = '"(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL}=${LABEL_VALUE})(?:,${LABEL}=${LABEL_VALUE})*)?\\})? (${VALUE})$`);
const PAIR = new RegExp(`(${LABEL})=(${LABEL_VALUE})`, 'g');
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePrometheusText(text: string): Map<string, ParsedFamily> {
  if (!text.endsWith('\n')) throw new Error('Prometheus text must end with a newline');
  const families = new Map<string, ParsedFamily & { help: string; type: string }>();
  let current: string | undefined;
  for (const [i, line] of text.slice(0, -1).split('\n').entries()) {
    const where = `line ${i + 1} "${line}"`;
    const meta = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, 'HELP' | 'TYPE', string, string];
      let family = families.get(name);
      if (family && current !== name) throw new Error(`${where}: family ${name} declared twice`);
      if (!family) families.set(name, (family = { help: '', type: 'untyped', samples: [] }));
      if (family.samples.length > 0) throw new Error(`${where}: ${kind} after samples of ${name}`);
      if (kind === 'TYPE' && !TYPES.has(rest)) throw new Error(`${where}: unknown type`);
      if (kind === 'HELP' && /\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) throw new Error(`${where}: bad escape in HELP`);
      if (kind === 'TYPE') family.type = rest;
      else family.help = rest;
      current = name;
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`${where}: not a valid sample line`);
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    if (name !== current) throw new Error(`${where}: sample of ${name} outside its family (${current ?? 'none'})`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (labelText ?? '').matchAll(PAIR)) {
      if (k! in labels) throw new Error(`${where}: label ${k} repeated`);
      labels[k!] = v!.slice(1, -1).replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : Number(valueText);
    families.get(name)!.samples.push({ labels, value });
  }
  return families;
}
