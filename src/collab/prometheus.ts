/**
 * The training view a coordinator keeps in its store, as metric families for `/metrics` (`cohort
 * start`'s dashboard, `cohort run --coordinator --metrics-port`): the swarm's newest epoch, alive
 * peers, throughput and loss, and every peer's credited contribution (labels `run`, `peer` and
 * `display_name`), read from the store at each scrape.
 */
import { METRIC } from '../store/metric-series.js';
import type { Store } from '../store/index.js';
import type { MetricFamily } from '../util/prometheus.js';

/** Swarm series exported as gauges: store series → metric name and help. */
const SWARM_GAUGES: ReadonlyArray<readonly [series: string, name: string, help: string]> = [
  [METRIC.epoch, 'cohort_training_epoch', 'The swarm epoch (optimizer steps taken), as last seen by this coordinator'],
  [METRIC.peersAlive, 'cohort_training_peers_alive', 'Peers with a live progress record'],
  [METRIC.swarmSamplesPerSecond, 'cohort_training_samples_per_second', 'The swarm throughput the peers report, samples/s'],
  [METRIC.samplesAccumulated, 'cohort_training_samples_accumulated', 'Samples the swarm has gathered toward the next step'],
  [METRIC.targetBatchSize, 'cohort_training_target_batch_size', 'Samples the swarm gathers per optimizer step'],
  [METRIC.etaSeconds, 'cohort_training_eta_seconds', 'Estimated seconds until the next step'],
  [METRIC.loss, 'cohort_training_loss', 'Swarm loss of the newest step (sample-weighted over the peers)'],
];

type Total = ReturnType<Store['contributions']['totals']>[number];
/** Per-peer contribution totals exported as counters: name, help and the value. */
const CONTRIBUTION_COUNTERS: ReadonlyArray<readonly [name: string, help: string, value: (t: Total) => number]> = [
  ['cohort_contribution_credited_samples_total', 'Samples credited to the peer after the throughput and all-reduce weight checks', (t) => t.credited],
  ['cohort_contribution_claimed_samples_total', 'Samples the peer claimed in the steps credited', (t) => t.claimed],
  ['cohort_contribution_compute_seconds_total', 'Seconds of compute credited to the peer', (t) => t.computeSeconds],
  ['cohort_contribution_steps_total', 'Optimizer steps of the peer credited', (t) => t.steps],
  ['cohort_contribution_flagged_steps_total', 'Steps whose claim was capped and flagged', (t) => t.flaggedSteps],
];

/** The coordinator's metrics in `store` (a series without data has no sample). */
export function trainingMetrics(store: Store): MetricFamily[] {
  return [
    ...SWARM_GAUGES.map(([series, name, help]): MetricFamily => ({
      name,
      type: 'gauge',
      help,
      read: () => {
        const p = store.metrics.latest(series);
        return p ? [[{}, p.value]] : [];
      },
    })),
    ...CONTRIBUTION_COUNTERS.map(([name, help, value]): MetricFamily => ({
      name,
      type: 'counter',
      help,
      labelNames: ['run', 'peer', 'display_name'],
      read: () => store.contributions.totals().map((t) => [{ run: t.runId, peer: t.peerId, display_name: t.displayName ?? '' }, value(t)]),
    })),
  ];
}
