import type { MetricPoint } from '../store/index.js';
import type { SwarmStats } from './node.js';

/** A stats snapshot in Prometheus text exposition format (for `/metrics` endpoints and scrapers). */
export function toPrometheus(stats: SwarmStats): string {
  const lines: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, samples: Array<[Record<string, string>, number]>): void => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      const text = Object.entries(labels)
        .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`)
        .join(',');
      lines.push(`${name}${text ? `{${text}}` : ''} ${value}`);
    }
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
  return lines.join('\n') + '\n';
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
