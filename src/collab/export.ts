/**
 * Exports of a node's store for analysis: metric points (the coordinator's per-epoch swarm metrics
 * and per-peer values) and per-peer contributions, as CSV (RFC 4180, via csv-stringify) or JSON
 * (an array of row objects). Rows are produced lazily so a long run's history streams out.
 */
import { pipeline, Readable } from 'node:stream';
import { stringify } from 'csv-stringify';
import type { Store } from '../store/index.js';

export const EXPORT_TABLES = ['metrics', 'contributions'] as const;
export type ExportTable = (typeof EXPORT_TABLES)[number];
export const EXPORT_FORMATS = ['csv', 'json'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export interface ExportOptions {
  readonly table: ExportTable;
  readonly format: ExportFormat;
  /** Metric series to include (metrics table only); default all. */
  readonly series?: readonly string[];
  /** Only points recorded (or steps credited) at or after this time, ms since the Unix epoch. */
  readonly since?: number;
}

type Row = Record<string, string | number | null>;

/** Columns of each table, in order (the CSV header and the JSON keys). */
export const EXPORT_COLUMNS: Record<ExportTable, readonly string[]> = {
  metrics: ['time', 'ts', 'series', 'epoch', 'peer', 'display_name', 'value'],
  contributions: ['run', 'rank', 'peer', 'display_name', 'credited_samples', 'claimed_samples', 'share', 'compute_hours', 'steps', 'flagged_steps'],
};

/** The table's rows (objects keyed by EXPORT_COLUMNS). */
function* exportRows(store: Store, options: Omit<ExportOptions, 'format'>): Generator<Row> {
  const names = store.contributions.displayNames();
  if (options.table === 'metrics') {
    for (const p of store.metrics.iteratePoints({ ...(options.series ? { series: options.series } : {}), ...(options.since !== undefined ? { since: options.since } : {}) })) {
      yield { time: new Date(p.ts).toISOString(), ts: p.ts, series: p.series, epoch: p.epoch, peer: p.peer, display_name: names.get(p.peer) ?? '', value: p.value };
    }
    return;
  }
  // totals come by run, most credited first: rank and share are within the run
  const totals = store.contributions.totals(options.since !== undefined ? { since: options.since } : {});
  const perRun = new Map<string, number>();
  for (const t of totals) perRun.set(t.runId, (perRun.get(t.runId) ?? 0) + t.credited);
  let rank = 0;
  for (const [i, t] of totals.entries()) {
    rank = i > 0 && totals[i - 1]!.runId === t.runId ? rank + 1 : 1;
    const all = perRun.get(t.runId)!;
    yield {
      run: t.runId,
      rank,
      peer: t.peerId,
      display_name: t.displayName ?? '',
      credited_samples: t.credited,
      claimed_samples: t.claimed,
      share: all > 0 ? t.credited / all : 0,
      compute_hours: t.computeSeconds / 3600,
      steps: t.steps,
      flagged_steps: t.flaggedSteps,
    };
  }
}

/** The export as a text stream (CSV with a header row, or a JSON array with one row per line). */
export function exportStream(store: Store, options: ExportOptions): Readable {
  const rows = exportRows(store, options);
  if (options.format === 'csv') {
    // csv-stringify quotes fields with commas, quotes or line breaks and doubles embedded quotes (RFC 4180)
    const csv = stringify({ header: true, columns: [...EXPORT_COLUMNS[options.table]], record_delimiter: 'windows' });
    // pipeline, not pipe: a reader that stops early destroys csv, and with it the rows, whose open
    // statement would keep the store from closing; an error of either reaches the reader through csv
    pipeline(Readable.from(rows), csv, () => {});
    return csv;
  }
  return Readable.from(jsonLines(rows));
}

function* jsonLines(rows: Iterable<Row>): Generator<string> {
  let first = true;
  yield '[';
  for (const row of rows) {
    yield `${first ? '\n' : ',\n'}${JSON.stringify(row)}`;
    first = false;
  }
  yield first ? ']\n' : '\n]\n';
}
