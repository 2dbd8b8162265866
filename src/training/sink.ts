/**
 * Where training events go: metric rows in the store (what the dashboard's charts, `cohort metrics`
 * and a restarted node's contribution totals read; the store skips and reports a point that is not a
 * finite number, so a metric never stops training), the dashboard's live numbers, and log lines.
 */
import { busySecondsPerGb } from '../averaging/cpu-meter.js';
import type { Logger } from '../log/logger.js';
import { AVERAGING_MODES, type SwarmState } from '../shared/api.js';
import { METRIC } from '../store/metric-series.js';
import type { Store } from '../store/index.js';
import type { TrainingEvent } from './events.js';

/** Rows of the swarm view are written at most this often (a micro-batch can take milliseconds), and after every step. */
const VIEW_ROWS_EVERY_MS = 1000;
/** Alone, one step line per this many steps. */
const SOLO_STEP_LINE_EVERY = 10;

export class TrainingSink {
  private lastViewRows = 0;
  private steppedSinceViewRows = false;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {}

  readonly handle = (e: TrainingEvent): void => {
    switch (e.type) {
      case 'stepped':
        this.steppedSinceViewRows = true;
        this.store.metrics.record([
          { series: METRIC.loss, value: e.loss, epoch: e.epoch, ts: e.at },
          { series: METRIC.epoch, value: e.epoch, ts: e.at },
          { series: METRIC.samples, value: e.contributed.samples, ts: e.at },
          { series: METRIC.computeSeconds, value: e.contributed.seconds, ts: e.at },
        ]);
        // a swarm peer's step lines are the collaborative optimizer's (hivemind's wording)
        if (e.alone && e.epoch % SOLO_STEP_LINE_EVERY === 0) this.log.info(`Step #${e.epoch}, loss ${e.loss.toFixed(3)} (training alone: this node has not joined a swarm)`);
        return;
      case 'progress': {
        if (!this.steppedSinceViewRows && e.at - this.lastViewRows < VIEW_ROWS_EVERY_MS) return;
        this.lastViewRows = e.at;
        this.steppedSinceViewRows = false;
        const s = e.swarm;
        this.store.metrics.record([
          { series: METRIC.samplesPerSecond, value: e.samplesPerSecond, ts: e.at },
          { series: METRIC.swarmSamplesPerSecond, value: s.samplesPerSecond, ts: e.at },
          { series: METRIC.peersAlive, value: s.peers, ts: e.at },
          { series: METRIC.samplesAccumulated, value: s.samplesAccumulated, ts: e.at },
          { series: METRIC.targetBatchSize, value: s.targetBatchSize, ts: e.at },
          ...(s.etaSeconds !== null ? [{ series: METRIC.etaSeconds, value: s.etaSeconds, ts: e.at }] : []),
        ]);
        return;
      }
      case 'averaging': {
        this.log.debug({ round: e.round, event: e.event.type }, 'averaging');
        if (e.event.type !== 'averaged') return;
        const cpu = e.event.result.cpu;
        const perGb = busySecondsPerGb(cpu);
        this.store.metrics.record([
          { series: METRIC.averagingBusySeconds, value: cpu.busySeconds, ts: e.at },
          { series: METRIC.averagingBytes, value: cpu.bytes, ts: e.at },
          { series: METRIC.averagingBytesSent, value: e.event.result.bytesSent, ts: e.at },
          { series: METRIC.averagingCompression, value: e.event.result.powerSgd?.ratio ?? 1, ts: e.at },
          { series: METRIC.averagingMode, value: AVERAGING_MODES.indexOf(e.event.mode), ts: e.at },
          ...(perGb !== undefined ? [{ series: METRIC.averagingBusySecondsPerGb, value: perGb, ts: e.at }] : []),
        ]);
        return;
      }
      // the optimizer logged why; the store keeps the counts for the dashboard and `cohort metrics`
      case 'skipped':
        this.store.metrics.record([{ series: METRIC.badMicroBatches, value: e.total, ts: e.at }]);
        return;
      case 'restored':
        this.store.metrics.record([{ series: METRIC.backupsRestored, value: e.total, epoch: e.epoch, ts: e.at }]);
        return;
      // their log lines are the fetch's, the optimizer's and the training service's
      case 'data-fetch':
      case 'data-mismatch':
      case 'alone':
        return;
      case 'halted':
        if (e.cause === 'error') this.log.error(e.reason);
        else this.log.warn(`training stopped: ${e.reason}`);
        return;
    }
  };

  /** Contribution totals a restarted node continues from. */
  contributed(): { samples: number; seconds: number } {
    return { samples: this.store.metrics.latest(METRIC.samples)?.value ?? 0, seconds: this.store.metrics.latest(METRIC.computeSeconds)?.value ?? 0 };
  }
}

/** The dashboard's live swarm numbers an event changes (undefined: none). */
export function swarmStateUpdate(e: TrainingEvent): Partial<Omit<SwarmState, 'updatedAt' | 'reachability'>> | undefined {
  if (e.type === 'stepped') return { epoch: e.epoch, lastLoss: e.loss };
  if (e.type === 'averaging' && e.event.type === 'averaged') {
    const { cpu, bytesSent, powerSgd } = e.event.result;
    return { averagingBusySeconds: cpu.busySeconds, averagingBusySecondsPerGb: busySecondsPerGb(cpu) ?? null, averagingBytesSent: bytesSent, averagingCompression: powerSgd?.ratio ?? 1, averagingMode: e.event.mode };
  }
  if (e.type !== 'progress') return undefined;
  const s = e.swarm;
  return { epoch: s.epoch, peersAlive: s.peers, samplesPerSecond: s.samplesPerSecond, samplesAccumulated: Math.round(s.samplesAccumulated), targetBatchSize: s.targetBatchSize, etaSeconds: s.etaSeconds };
}
