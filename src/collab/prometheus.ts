/**
 * The training view a coordinator keeps in its store, as Prometheus text for the dashboard server's
 * `/metrics`: the swarm's newest epoch, alive peers, throughput and loss, and every peer's credited
 * contribution (labels `run`, `peer` and `display_name`). Formatted by the swarm's one Prometheus formatter.
 */
import { METRIC } from '../store/metric-series.js';
import type { Store } from '../store/index.js';
import { formatPrometheus, type PrometheusFamily } from '../swarm/index.js';

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

/** Prometheus text of the coordinator's metrics in `store` (series without data are listed without samples). */
export function trainingPrometheus(store: Store): string {
  const families: PrometheusFamily[] = SWARM_GAUGES.map(([series, name, help]) => {
    const p = store.metrics.latest(series);
    return { name, type: 'gauge', help, samples: p ? [[{}, p.value]] : [] };
  });
  const totals = store.contributions.totals();
  const per = (value: (t: (typeof totals)[number]) => number): PrometheusFamily['samples'] => totals.map((t) => [{ run: t.runId, peer: t.peerId, display_name: t.displayName ?? '' }, value(t)]);
  families.push(
    { name: 'cohort_contribution_credited_samples_total', type: 'counter', help: 'Samples credited to the peer after the throughput and all-reduce weight checks', samples: per((t) => t.credited) },
    { name: 'cohort_contribution_claimed_samples_total', type: 'counter', help: 'Samples the peer claimed in the steps credited', samples: per((t) => t.claimed) },
    { name: 'cohort_contribution_compute_seconds_total', type: 'counter', help: 'Seconds of compute credited to the peer', samples: per((t) => t.computeSeconds) },
    { name: 'cohort_contribution_steps_total', type: 'counter', help: 'Optimizer steps of the peer credited', samples: per((t) => t.steps) },
    { name: 'cohort_contribution_flagged_steps_total', type: 'counter', help: 'Steps whose claim was capped and flagged', samples: per((t) => t.flaggedSteps) },
  );
  return formatPrometheus(families);
}
