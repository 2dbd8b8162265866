import type { MetricPoint } from '../store/index.js';
import type { SwarmStats } from './stats.js';

/** One metric family of the Prometheus text exposition format (version 0.0.4). */
export interface PrometheusFamily {
  /** [a-zA-Z_:][a-zA-Z0-9_:]* */
  readonly name: string;
  readonly type: 'gauge' | 'counter';
  readonly help: string;
  readonly samples: ReadonlyArray<readonly [labels: Readonly<Record<string, string>>, value: number]>;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * Metric families as Prometheus text: the one formatter behind every `/metrics` Cohort serves.
 * Label values and help text are escaped (backslash, quote, newline), so volunteer-chosen names
 * cannot break the format; values are Go-style floats (NaN, +Inf, -Inf).
 */
export function formatPrometheus(families: readonly PrometheusFamily[]): string {
  const lines: string[] = [];
  for (const f of families) {
    if (!METRIC_NAME.test(f.name)) throw new RangeError(`Prometheus metric name "${f.name}" is not valid`);
    lines.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`);
    for (const [labels, value] of f.samples) {
      const text = Object.entries(labels)
        .map(([k, v]) => {
          if (!LABEL_NAME.test(k) || k.startsWith('__')) throw new RangeError(`Prometheus label name "${k}" of ${f.name} is not valid`);
          return `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
        })
        .join(',');
      lines.push(`${f.name}${text ? `{${text}}` : ''} ${promValue(value)}`);
    }
  }
  return lines.join('\n') + '\n';
}

function promValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** A stats snapshot in Prometheus text exposition format (for `/metrics` endpoints and scrapers). */
export function toPrometheus(stats: SwarmStats): string {
  const families: PrometheusFamily[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, samples: Array<[Record<string, string>, number]>): void => {
    families.push({ name, type, help, samples });
  };
  metric('cohort_swarm_reachability', 'gauge', 'This peer’s reachability: 1 for the current state (public serves the DHT; private and unknown are DHT clients)', (['unknown', 'public', 'private'] as const).map((state) => [{ state }, stats.reachability === state ? 1 : 0]));
  metric('cohort_swarm_connected_peers', 'gauge', 'Peers with an open connection', [[{}, stats.connectedPeers]]);
  metric('cohort_swarm_client_mode_peers', 'gauge', 'Connected peers in client mode', [[{}, stats.clientModePeers.length]]);
  metric('cohort_swarm_routing_table_size', 'gauge', 'DHT servers in the routing table', [[{}, stats.routingTableSize]]);
  metric('cohort_swarm_records', 'gauge', 'DHT record entries held by this peer', [[{}, stats.records.entries]]);
  metric('cohort_swarm_record_keys', 'gauge', 'DHT record keys held by this peer', [[{}, stats.records.keys]]);
  metric('cohort_swarm_record_bytes', 'gauge', 'Bytes of DHT records held by this peer', [[{}, stats.records.bytes]]);
  metric('cohort_swarm_record_requests_served_total', 'counter', 'Records requests answered', [
    [{ kind: 'store' }, stats.records.storeRequestsServed],
    [{ kind: 'get' }, stats.records.getRequestsServed],
  ]);
  metric('cohort_swarm_records_rejected_total', 'counter', 'Records and requests refused, by reason', Object.entries(stats.records.rejected).map(([reason, n]) => [{ reason }, n ?? 0]));
  metric(
    'cohort_swarm_transfer_bytes_total',
    'counter',
    'Bytes sent and received per protocol (global: whole connections)',
    Object.entries(stats.transfer).flatMap(([protocol, t]): Array<[Record<string, string>, number]> => [
      [{ protocol, direction: 'sent' }, t.sent],
      [{ protocol, direction: 'received' }, t.received],
    ]),
  );
  return formatPrometheus(families);
}

/** The stats as points of the store's metric series (`swarm.*`), for the dashboard's history. */
export function statsMetricPoints(stats: SwarmStats, ts = Date.now()): MetricPoint[] {
  const totals = Object.values(stats.transfer);
  const rejected = Object.values(stats.records.rejected).reduce((a: number, n) => a + (n ?? 0), 0);
  return [
    { series: 'swarm.connected_peers', value: stats.connectedPeers, ts },
    { series: 'swarm.client_mode_peers', value: stats.clientModePeers.length, ts },
    { series: 'swarm.routing_table_size', value: stats.routingTableSize, ts },
    { series: 'swarm.records', value: stats.records.entries, ts },
    { series: 'swarm.records_rejected', value: rejected, ts },
    { series: 'swarm.bytes_sent', value: stats.transfer['global']?.sent ?? totals.reduce((a, t) => a + t.sent, 0), ts },
    { series: 'swarm.bytes_received', value: stats.transfer['global']?.received ?? totals.reduce((a, t) => a + t.received, 0), ts },
  ];
}
