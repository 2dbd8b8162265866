/**
 * Where training events go: metric rows in the store (what the dashboard's charts, `cohort metrics`
 * and a restarted node's contribution totals read; the store skips and reports a point that is not a
 * finite number, so a metric never stops training), the dashboard's live numbers, and log lines.
 */
import type { AllreduceResult } from '../averaging/allreduce.js';
import { busySecondsPerGb } from '../averaging/cpu-meter.js';
import type { Logger } from '../log/logger.js';
import { AVERAGING_MODE_NAMES, AVERAGING_MODES, type AveragingMode, type SwarmState } from '../shared/api.js';
import { METRIC } from '../store/metric-series.js';
import type { Store } from '../store/index.js';
import type { TrainingEvent } from './events.js';

/** Rows of the swarm view are written at most this often (a micro-batch can take milliseconds), and after every step. */
const VIEW_ROWS_EVERY_MS = 1000;
/** Alone, one step line per this many steps. */
const SOLO_STEP_LINE_EVERY = 10;

/** What this peer's all-reduces sent since its previous step: the rounds of the epoch its next step ends. */
class EpochAveraging {
  rounds = 0;
  bytesSent = 0;
  /** Values of the vectors averaged, and the values sent in their place (PowerSGD sends its factors). */
  values = 0;
  valuesSent = 0;

  add(r: AllreduceResult): void {
    this.rounds++;
    this.bytesSent += r.bytesSent;
    this.values += r.vector.length;
    this.valuesSent += r.vector.length / (r.powerSgd?.ratio ?? 1);
  }

  /** A round that failed after sending (a PowerSGD phase): its bytes count, nothing was averaged. */
  addFailed(bytesSent: number): void {
    this.bytesSent += bytesSent;
  }
}

/**
 * An epoch's compression: values of every vector it averaged ÷ values sent in their place, over all
 * its rounds (1: plain averaging and DiLoCo; PowerSGD's ratio, lowered by a state-averaging round);
 * the wire format (fp16, 8-bit) is in the bytes sent, not here. Undefined when it averaged nothing.
 */
function epochCompression(e: EpochAveraging): number | undefined {
  return e.valuesSent > 0 ? e.values / e.valuesSent : undefined;
}

export class TrainingSink {
  private lastViewRows = 0;
  private steppedSinceViewRows = false;
  private epochAveraging = new EpochAveraging();

  /** `averagingMode`: the run's (a swarm peer's; none alone), named in each epoch's averaging figures. */
  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly averagingMode?: AveragingMode,
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
        if (!e.alone && this.averagingMode !== undefined) this.epochAveraged(e.epoch, this.averagingMode, e.at);
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
        if (e.event.type === 'failed' && e.event.bytesSent !== undefined) this.epochAveraging.addFailed(e.event.bytesSent);
        if (e.event.type !== 'averaged') return;
        this.epochAveraging.add(e.event.result);
        const cpu = e.event.result.cpu;
        const perGb = busySecondsPerGb(cpu);
        this.store.metrics.record([
          { series: METRIC.averagingBusySeconds, value: cpu.busySeconds, ts: e.at },
          { series: METRIC.averagingBytes, value: cpu.bytes, ts: e.at },
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
      case 'joined':
        return;
      case 'halted':
        if (e.cause === 'error') this.log.error(e.reason);
        else this.log.warn(`training stopped: ${e.reason}`);
        return;
    }
  };

  /** Records and logs what this peer's averaging sent in the epoch its step ended, and starts the next epoch's count. */
  private epochAveraged(epoch: number, mode: AveragingMode, at: number): void {
    const e = this.epochAveraging;
    this.epochAveraging = new EpochAveraging();
    const compression = epochCompression(e);
    this.store.metrics.record([
      { series: METRIC.averagingMode, value: AVERAGING_MODES.indexOf(mode), epoch, ts: at },
      { series: METRIC.averagingBytesSent, value: e.bytesSent, epoch, ts: at },
      ...(compression !== undefined ? [{ series: METRIC.averagingCompression, value: compression, epoch, ts: at }] : []),
    ]);
    const sent = `${(e.bytesSent / 1e6).toPrecision(3)} MB sent`;
    const fewer = compression !== undefined && compression > 1 ? `, ${compression.toFixed(1)}× fewer values than plain averaging` : '';
    const what = compression === undefined ? (e.bytesSent > 0 ? `${sent}, nothing averaged` : 'nothing averaged') : `${sent} in ${e.rounds} all-reduce${e.rounds === 1 ? '' : 's'}${fewer}`;
    this.log.info(`Epoch #${epoch} averaging: ${AVERAGING_MODE_NAMES[mode]}, ${what}`);
  }

  /** Contribution totals a restarted node continues from. */
  contributed(): { samples: number; seconds: number } {
    return { samples: this.store.metrics.latest(METRIC.samples)?.value ?? 0, seconds: this.store.metrics.latest(METRIC.computeSeconds)?.value ?? 0 };
  }
}

/** The dashboard's live swarm numbers an event changes (undefined: none). */
export function swarmStateUpdate(e: TrainingEvent): Partial<Omit<SwarmState, 'updatedAt' | 'reachability'>> | undefined {
  if (e.type === 'stepped') return { epoch: e.epoch, lastLoss: e.loss };
  // an epoch's averaging figures are the sink's (TrainingSink.epochAveraged): the dashboard reads them from the store
  if (e.type === 'averaging' && e.event.type === 'averaged') {
    const { cpu } = e.event.result;
    return { averagingBusySeconds: cpu.busySeconds, averagingBusySecondsPerGb: busySecondsPerGb(cpu) ?? null };
  }
  if (e.type !== 'progress') return undefined;
  const s = e.swarm;
  return { epoch: s.epoch, peersAlive: s.peers, samplesPerSecond: s.samplesPerSecond, samplesAccumulated: Math.round(s.samplesAccumulated), targetBatchSize: s.targetBatchSize, etaSeconds: s.etaSeconds };
}
