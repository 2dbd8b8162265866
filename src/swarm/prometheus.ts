import type { MetricPoint } from '../store/index.js';
import type { MetricFamily } from '../util/prometheus.js';
import type { SwarmStats } from './stats.js';

/**
 * A swarm node's stats as metric families (`cohort run` and `cohort swarm start` serve them on
 * --metrics-port), read from `stats()` at each scrape.
 */
export function swarmMetrics(node: { stats(): SwarmStats }): MetricFamily[] {
  const family = (name: string, type: MetricFamily['type'], help: string, labelNames: readonly string[], read: (s: SwarmStats) => Array<[Record<string, string>, number]>): MetricFamily => ({
    name,
    type,
    help,
    labelNames,
    read: () => read(node.stats()),
  });
  return [
    family('cohort_swarm_reachability', 'gauge', 'This peer’s reachability: 1 for the current state (public serves the DHT; private and unknown are DHT clients)', ['state'], (s) => (['unknown', 'public', 'private'] as const).map((state) => [{ state }, s.reachability === state ? 1 : 0])),
    family('cohort_swarm_connected_peers', 'gauge', 'Peers with an open connection', [], (s) => [[{}, s.connectedPeers]]),
    family('cohort_swarm_client_mode_peers', 'gauge', 'Connected peers in client mode', [], (s) => [[{}, s.clientModePeers.length]]),
    family('cohort_swarm_routing_table_size', 'gauge', 'DHT servers in the routing table', [], (s) => [[{}, s.routingTableSize]]),
    family('cohort_swarm_records', 'gauge', 'DHT record entries held by this peer', [], (s) => [[{}, s.records.entries]]),
    family('cohort_swarm_record_keys', 'gauge', 'DHT record keys held by this peer', [], (s) => [[{}, s.records.keys]]),
    family('cohort_swarm_record_bytes', 'gauge', 'Bytes of DHT records held by this peer', [], (s) => [[{}, s.records.bytes]]),
    family('cohort_swarm_record_requests_served_total', 'counter', 'Records requests answered', ['kind'], (s) => [
      [{ kind: 'store' }, s.records.storeRequestsServed],
      [{ kind: 'get' }, s.records.getRequestsServed],
    ]),
    family('cohort_swarm_record_lookups_total', 'counter', 'How this peer’s record stores and gets found a key’s closest servers: walked (a DHT lookup), cached (a recent lookup’s), stale (cached servers that did not all answer, then walked)', ['result'], (s) =>
      (['walked', 'cached', 'stale'] as const).map((result) => [{ result }, s.records.lookups[result]]),
    ),
    family('cohort_swarm_records_rejected_total', 'counter', 'Records and requests refused, by reason', ['reason'], (s) => Object.entries(s.records.rejected).map(([reason, n]) => [{ reason }, n ?? 0])),
    family('cohort_swarm_transfer_bytes_total', 'counter', 'Bytes sent and received per protocol (global: whole connections)', ['protocol', 'direction'], (s) =>
      Object.entries(s.transfer).flatMap(([protocol, t]): Array<[Record<string, string>, number]> => [
        [{ protocol, direction: 'sent' }, t.sent],
        [{ protocol, direction: 'received' }, t.received],
      ]),
    ),
  ];
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
