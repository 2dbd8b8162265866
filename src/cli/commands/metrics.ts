import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { z } from 'zod';
import { EXPORT_FORMATS, EXPORT_TABLES, type ExportOptions } from '../../collab/export.js';
import { ConfigError } from '../../config/load.js';
import { commaList } from '../../config/settings.js';
import { METRIC } from '../../store/metric-series.js';
import { flagAction } from '../context.js';
import { flagRow, outputFlag } from '../flag-table.js';
import { writeFileWhole } from '../../util/output-path.js';

const EXPORT_FLAGS = {
  format: flagRow({ schema: z.enum(EXPORT_FORMATS), default: 'csv', arg: '<format>', description: 'output format' }),
  table: flagRow({ schema: z.enum(EXPORT_TABLES), default: 'metrics', arg: '<table>', description: 'what to export: metrics (one row per point: time, ts, series, epoch, peer, display_name, value) or contributions (one row per peer: rank, credited and claimed samples, share, compute hours, steps, flagged steps)' }),
  series: flagRow({ schema: z.string(), arg: '<names>', description: 'comma-separated metric series to export (metrics table; default all), e.g. loss,peers_alive,credited_samples' }),
  since: flagRow({ schema: z.string(), arg: '<when>', description: 'only points recorded (or steps credited) since then: an ISO 8601 date/time (2026-05-01, 2026-05-01T12:00:00Z) or a duration back from now (90s, 30m, 2h, 7d)' }),
  out: flagRow({ schema: z.string(), arg: '<file>', description: 'write to this file instead of stdout' }),
};

/** `cohort metrics export`: the store's metric history or contributions as CSV or JSON. */
export function registerMetrics(program: Command): void {
  const metrics = program.command('metrics').description('read the metrics this node (or coordinator) recorded in its data directory');
  const cmd = metrics
    .command('export')
    .description('export metric points (per-epoch swarm metrics, per-peer values) or per-peer contributions as CSV or JSON');
  flagAction(cmd, EXPORT_FLAGS, async (flags, { config, log }) => {
    const { format, table } = flags;
    if (flags.series !== undefined && table !== 'metrics') throw new ConfigError('--series', 'selects metric series, so it needs --table metrics');
    const since = parseSince(flags.since, Date.now());
    if (flags.out !== undefined) outputFlag('--out', flags.out, 'file');
    const [{ openExistingStore }, { CREDITED_SERIES, FLAGGED_SERIES, exportStream }] = await Promise.all([import('../../store/index.js'), import('../../collab/index.js')]);
    const store = openExistingStore(config.dataDir);
    try {
      // the series a store may hold even before it has points of them, and those it has
      const known = [...Object.values(METRIC), CREDITED_SERIES, FLAGGED_SERIES, ...store.metrics.seriesNames()];
      const series = flags.series === undefined ? undefined : parseSeries(flags.series, known);
      const options: ExportOptions = { table, format, ...(series ? { series } : {}), ...(since !== undefined ? { since } : {}) };
      if (flags.out === undefined) {
        try {
          await pipeline(exportStream(store, options), process.stdout, { end: false });
        } catch (err) {
          // the reader closed the pipe (`| head`): it has what it asked for
          if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
        }
        return;
      }
      await writeFileWhole(flags.out, (partial) => pipeline(exportStream(store, options), fs.createWriteStream(partial, { flags: 'wx' })));
      log.info(`exported the ${table} table of ${store.file} as ${format} to ${flags.out}`);
    } finally {
      store.close();
    }
  });
}

const DURATION = /^(\d+(?:\.\d+)?)(s|m|h|d)$/;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `--since` as ms since the Unix epoch. */
function parseSince(raw: string | undefined, now: number): number | undefined {
  if (raw === undefined) return undefined;
  const text = raw.trim();
  const duration = DURATION.exec(text);
  if (duration) return now - Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS];
  const at = ISO_DATE.test(text) ? Date.parse(text) : Number.NaN;
  if (!Number.isFinite(at)) throw new ConfigError('--since', `invalid value ${JSON.stringify(raw)}; accepted: an ISO 8601 date/time (2026-05-01, 2026-05-01T12:00:00Z) or a duration back from now (90s, 30m, 2h, 7d)`);
  return at;
}

function parseSeries(raw: string, known: readonly string[]): string[] {
  const names = commaList(raw);
  const accepted = [...new Set(known)].sort();
  const unknown = names.filter((n) => !accepted.includes(n));
  if (names.length === 0 || unknown.length > 0) throw new ConfigError('--series', `invalid value ${JSON.stringify(raw)}${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}; accepted: a comma-separated list of ${accepted.join(', ')}`);
  return names;
}
