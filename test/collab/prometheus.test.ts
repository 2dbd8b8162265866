// The coordinator's metrics (prom-client collectors over the store) as Prometheus text on the dashboard
// server's /metrics, read back with a strict parser of the exposition format.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { trainingMetrics } from '../../src/collab/prometheus.js';
import { createLogger } from '../../src/log/logger.js';
import { NodeController } from '../../src/node/controller.js';
import { startDashboardServer } from '../../src/node/dashboard-server.js';
import { METRIC } from '../../src/store/metric-series.js';
import { openStore } from '../../src/store/index.js';
import { metricsRegistry, prometheusText } from '../../src/util/prometheus.js';
import { parsePrometheusText } from '../helpers/prometheus.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: 'silent', logFormat: 'json' });
const TOKEN = 'metrics-token-0123456789abcdef';
/** A volunteer-chosen name with every character the label syntax must escape. */
const NAME = 'ada "the first" \\ programmer\nline two';

test('GET /metrics serves the swarm and per-peer contribution metrics as valid Prometheus text, behind the token', async (t) => {
  const store = openStore(tmpDir(t));
  const now = Date.now();
  store.metrics.record([
    { series: METRIC.epoch, value: 6, epoch: 6, ts: now - 2000 },
    { series: METRIC.epoch, value: 7, epoch: 7, ts: now },
    { series: METRIC.peersAlive, value: 3, epoch: 7, ts: now },
    { series: METRIC.swarmSamplesPerSecond, value: 41.5, epoch: 7, ts: now },
    { series: METRIC.loss, value: 4.75, epoch: 7, ts: now },
    { series: METRIC.loss, value: 9, epoch: 2, peer: 'p1', ts: now },
  ]);
  const baseline = { time: now, totalSamples: 0, epoch: 0, samplesInEpoch: 0, computeSeconds: 0 };
  store.contributions.credit({ runId: 'r1', peerId: 'p1', epoch: 5, displayName: NAME, claimed: 120, credited: 120, computeSeconds: 30, ts: now }, baseline);
  store.contributions.credit({ runId: 'r1', peerId: 'p2', epoch: 5, claimed: 900, credited: 90, computeSeconds: 20, flag: 'inflated', ts: now }, baseline);
  const controller = new NodeController({ store, log, version: '0.0.0', refreshMs: 60_000 });
  const server = await startDashboardServer({ host: '127.0.0.1', port: 0, token: TOKEN, rendererDir: tmpDir(t), api: controller, log, metrics: metricsRegistry(trainingMetrics(store), { processMetrics: true }) });
  t.after(async () => {
    await server.close();
    await controller.close();
    store.close();
  });

  assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const families = parsePrometheusText(await res.text());
  assert.ok((families.get('process_resident_memory_bytes')?.samples[0]?.value ?? 0) > 0, 'process metrics are served too');
  const only = (name: string): number => {
    const f = families.get(name);
    assert.ok(f && f.samples.length === 1, `${name}: ${JSON.stringify(f)}`);
    return f.samples[0]!.value;
  };
  assert.equal(families.get('cohort_training_epoch')?.type, 'gauge');
  assert.equal(only('cohort_training_epoch'), 7);
  assert.equal(only('cohort_training_peers_alive'), 3);
  assert.equal(only('cohort_training_samples_per_second'), 41.5);
  assert.equal(only('cohort_training_loss'), 4.75, 'the swarm loss, not a peer’s');
  assert.deepEqual(families.get('cohort_training_eta_seconds')?.samples, [], 'a series never recorded has no sample');
  const credited = families.get('cohort_contribution_credited_samples_total')!;
  assert.equal(credited.type, 'counter');
  assert.deepEqual(credited.samples, [
    { name: 'cohort_contribution_credited_samples_total', labels: { run: 'r1', peer: 'p1', display_name: NAME }, value: 120 },
    { name: 'cohort_contribution_credited_samples_total', labels: { run: 'r1', peer: 'p2', display_name: '' }, value: 90 },
  ]);
  // values are read at each scrape: a later credit shows in the next one
  store.contributions.credit({ runId: 'r1', peerId: 'p1', epoch: 6, displayName: NAME, claimed: 30, credited: 30, computeSeconds: 5, ts: now }, baseline);
  const again = parsePrometheusText(await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text());
  assert.deepEqual(again.get('cohort_contribution_credited_samples_total')!.samples.map((s) => s.value), [150, 90]);
  assert.deepEqual(families.get('cohort_contribution_flagged_steps_total')!.samples.map((s) => [s.labels.peer, s.value]), [['p1', 0], ['p2', 1]]);
  assert.deepEqual(families.get('cohort_contribution_compute_seconds_total')!.samples.map((s) => s.value), [30, 20]);
});

test('metric families write special values and escapes, drop label sets that are gone, and refuse names the format cannot carry', async () => {
  let rows: Array<[Record<string, string>, number]> = [
    [{ k: 'v' }, Infinity],
    [{ k: 'w' }, Number.NaN],
  ];
  const families = [{ name: 'x_seconds', type: 'gauge' as const, help: 'a \\ b\nc', labelNames: ['k'], read: () => rows }];
  const registry = metricsRegistry(families);
  const f = parsePrometheusText(await registry.metrics()).get('x_seconds')!;
  assert.equal(f.help, 'a \\\\ b\\nc');
  assert.deepEqual(f.samples.map((s) => s.value), [Infinity, Number.NaN]);
  rows = [[{ k: NAME }, 2]];
  assert.deepEqual(parsePrometheusText(await registry.metrics()).get('x_seconds')!.samples, [{ name: 'x_seconds', labels: { k: NAME }, value: 2 }]);
  await assert.rejects(prometheusText([{ name: 'bad-name', type: 'gauge', help: 'h', read: () => [] }]), /Invalid metric name/);
  await assert.rejects(prometheusText([{ name: 'ok', type: 'gauge', help: 'h', labelNames: ['bad-label'], read: () => [] }]), /Invalid label name/);
});
