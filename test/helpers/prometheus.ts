/**
 * A strict reader of the Prometheus text exposition format 0.0.4 for tests
 * (https://prometheus.io/docs/instrumenting/exposition_formats/): every line must be empty, a HELP, a
 * TYPE or a sample of the family last declared (a histogram's `_bucket` with an `le` label, `_sum` and
 * `_count`; a summary's samples, `_sum` and `_count`); label values may only use the three escapes
 * (\\, \", \n); values are what Go's ParseFloat reads (NaN and Inf in any case). Throws naming the
 * line on the first violation.
 */
import assert from 'node:assert/strict';
import type { Proc } from './cli.js';
import { waitFor } from './swarm.js';

export interface ParsedFamily {
  readonly help: string;
  readonly type: string;
  /** `name` is the sample's own (a histogram's `x_bucket`, `x_sum`, `x_count`). */
  readonly samples: Array<{ name: string; labels: Record<string, string>; value: number }>;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
const VALUE = '(?:[+-]?(?:\\d+\\.?\\d*(?:[eE][+-]?\\d+)?|\\.\\d+(?:[eE][+-]?\\d+)?)|[nN][aA][nN]|[+-]?[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)';
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
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`${where}: not a valid sample line`);
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    const family = current === undefined ? undefined : families.get(current);
    const suffix = current !== undefined && name.startsWith(current) ? name.slice(current.length) : undefined;
    const allowed = family?.type === 'histogram' ? ['_bucket', '_sum', '_count'] : family?.type === 'summary' ? ['', '_sum', '_count'] : [''];
    if (suffix === undefined || !allowed.includes(suffix)) throw new Error(`${where}: sample of ${name} outside its family (${current ?? 'none'})`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (labelText ?? '').matchAll(PAIR)) {
      if (k! in labels) throw new Error(`${where}: label ${k} repeated`);
      labels[k!] = v!.slice(1, -1).replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    if (suffix === '_bucket' && labels.le === undefined) throw new Error(`${where}: a histogram bucket needs an le label`);
    if (family!.type === 'summary' && suffix === '' && labels.quantile === undefined) throw new Error(`${where}: a summary sample needs a quantile label`);
    const special = /^([+-]?)inf(inity)?$|^nan$/i.exec(valueText);
    const value = special ? (valueText.toLowerCase() === 'nan' ? Number.NaN : special[1] === '-' ? -Infinity : Infinity) : Number(valueText);
    family!.samples.push({ name, labels, value });
  }
  return families;
}

const METRICS_URL = /Prometheus metrics on (http:\/\/\S+\/metrics)/;

/** The /metrics address a `cohort` process prints on stdout (as its swarm addresses, whatever its log level) once its metrics server listens. */
export async function metricsUrl(proc: Proc): Promise<string> {
  await waitFor('the metrics server', () => METRICS_URL.test(proc.stdout), 60_000);
  return METRICS_URL.exec(proc.stdout)![1]!;
}

/** Scrapes `url` with the token and parses the body strictly. */
export async function scrape(url: string, token: string): Promise<Map<string, ParsedFamily>> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  const body = await res.text();
  assert.equal(res.status, 200, body);
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  return parsePrometheusText(body);
}
