/**
 * A training peer of a collaborative run: its micro-batches from the prepared dataset (its own
 * shard order), forward/backward on the engine, and the collaborative optimizer deciding when the
 * swarm steps. What happens is reported as training events.
 */
import { CollaborativeOptimizer, type CollaborativeOptions, type StepOutcome } from '../collab/index.js';
import { LOSS_SCALER_DEFAULTS, LossScaleError, saveModel, scaledGradients } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import { ensureDataset } from './data.js';
import type { EmitTrainingEvent } from './events.js';
import { MemoryLimitError, MemoryWatchdog, type WatchdogOptions } from './memory-limit.js';
import type { TrainerSettings } from './options.js';
import { openTrainingSession } from './session.js';
import { TrainingSink } from './sink.js';

export interface SwarmPeerInit extends WatchdogOptions {
  readonly node: SwarmNode;
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** The model and data shape (the run's), this peer's micro-batch and precision. */
  readonly trainer: TrainerSettings;
  /**
   * The volunteer's memory limit: the micro-batch shrinks to fit it, training refuses to start when
   * one sample does not fit, and a watchdog stops training when the process stays over it (both
   * reject with MemoryLimitError). Absent: no limit.
   */
  readonly memoryLimitMiB?: number | undefined;
  readonly collab: CollaborativeOptions;
  /** Stop after the swarm reaches this epoch. */
  readonly maxEpochs?: number | undefined;
  /** onnxruntime threads. */
  readonly threads?: number | undefined;
  readonly provider?: 'auto' | 'cpu';
  /** Save the final model here (config.json + model.safetensors) when training ends. */
  readonly out?: string | undefined;
  /** Test-only: run at 1/throttle of this machine's speed (sleeps between micro-batches). */
  readonly throttle?: number | undefined;
  readonly signal?: AbortSignal;
  /** Events beyond the store's metrics and the log (the app's dashboard). */
  readonly emit?: EmitTrainingEvent;
}

export interface SwarmPeerSummary {
  readonly epoch: number;
  readonly steps: number;
  readonly losses: ReadonlyArray<{ readonly epoch: number; readonly loss: number }>;
  readonly averaged: number;
  readonly localFallbacks: number;
  /** State-averaging rounds that succeeded (averageStateEvery). */
  readonly stateAveraged: number;
  readonly loadedState: number;
  readonly samples: number;
  /** fp16 micro-batches dropped because their gradients overflowed. */
  readonly skippedMicroBatches: number;
  /** Micro-batches dropped because their loss or gradients were not finite (beyond what the fp16 scaler handles). */
  readonly badMicroBatches: number;
  /** Steps that left non-finite parameters, undone by restoring the in-memory backup. */
  readonly restoredBackups: number;
}

export async function runSwarmPeer(init: SwarmPeerInit): Promise<SwarmPeerSummary> {
  const { node, store, log, trainer: t } = init;
  const sink = new TrainingSink(store, log);
  const emit: EmitTrainingEvent = (e) => {
    sink.handle(e);
    init.emit?.(e);
  };
  await ensureDataset(store, init.dataDir, log);
  const limit = init.memoryLimitMiB;
  const session = await openTrainingSession({
    store,
    log,
    trainer: t,
    provider: init.provider ?? 'auto',
    threads: init.threads,
    data: 'prepared',
    dataPeerId: node.peerId.toString(),
    memory: limit === undefined ? undefined : { limitMiB: limit, trainer: 'swarm', delayOptimizerStep: init.collab.delayOptimizerStep === true || init.collab.delayGradAveraging === true },
    onWarning: (m) => log.warn(m),
  });
  const collab = new CollaborativeOptimizer(node, session.config, session.params, session.optimizer, init.collab, log, (round, event) => emit({ type: 'averaging', round, event, at: Date.now() }));
  let watchdog: MemoryWatchdog | undefined;
  const summary = { epoch: 0, steps: 0, losses: [] as Array<{ epoch: number; loss: number }>, averaged: 0, localFallbacks: 0, stateAveraged: 0, loadedState: 0, badMicroBatches: 0, restoredBackups: 0 };
  /** The fp16 loss scaler backed off as far as it can: gradients are non-finite at any scale (see below). */
  let scalerGaveUp = false;
  const observe = (o: StepOutcome | undefined, samplesPerSecond?: number): void => {
    if (!o) return;
    const at = Date.now();
    if (o.type === 'stepped') {
      summary.steps++;
      summary.losses.push({ epoch: o.epoch, loss: o.loss });
      if (o.reason) summary.localFallbacks++;
      else if (o.averagedWith > 1) summary.averaged++;
      if (o.stateAveraging && 'averagedWith' in o.stateAveraging) summary.stateAveraged++;
      emit({ type: 'stepped', epoch: o.epoch, loss: o.loss, alone: false, contributed: collab.contributed, at });
    } else if (o.type === 'loaded' && o.donor) summary.loadedState++;
    else if (o.type === 'skipped') {
      summary.badMicroBatches = o.total;
      emit({ type: 'skipped', reason: o.reason, total: o.total, at });
    } else if (o.type === 'restored') {
      emit({ type: 'restored', epoch: o.epoch, reason: o.reason, total: ++summary.restoredBackups, at });
    }
    // a fresh state (restored or downloaded) gets a fresh loss scale: the floor was reached on the broken one
    if ((o.type === 'restored' || (o.type === 'loaded' && o.donor)) && scalerGaveUp && session.scaler) {
      session.scaler.importState({ ...session.scaler.exportState(), scale: LOSS_SCALER_DEFAULTS.initScale, growthTracker: 0 });
      scalerGaveUp = false;
    }
    else if (o.type === 'accumulated' && samplesPerSecond !== undefined) {
      const g = o.progress;
      emit({ type: 'progress', samplesPerSecond, swarm: { epoch: g.epoch, peers: g.peers, samplesPerSecond: g.samplesPerSecond, samplesAccumulated: g.estimatedSamples, targetBatchSize: g.targetBatchSize, etaSeconds: Number.isFinite(g.eta) ? g.eta : null }, at });
    }
  };
  try {
    log.info(`training a ${t.preset} ALBERT (${session.params.size} parameters) with the swarm on ${session.data.description}; target batch size ${init.collab.targetBatchSize}`);
    // a restarted peer keeps its contribution history (its identity is kept by the swarm node)
    observe(await collab.start(sink.contributed()));
    let halt: string | undefined;
    watchdog = limit === undefined ? undefined : new MemoryWatchdog({ limitBytes: limit * 2 ** 20, ...(init.memoryProbe ? { probe: init.memoryProbe } : {}), onExceeded: (reason) => (halt = reason) });
    watchdog?.start(init.watchdogIntervalMs);
    while (halt === undefined && !init.signal?.aborted && (init.maxEpochs === undefined || collab.epoch < init.maxEpochs)) {
      const started = performance.now();
      const batch = await session.data.next();
      // delay_optimizer_step: the pending LAMB step is taken on the master parameters meanwhile
      let result;
      try {
        result = await collab.computeWhileStepping((compute) => scaledGradients(session.backend, compute, batch, session.grads, session.scaler));
      } catch (err) {
        // fp16: gradients non-finite even at the smallest loss scale are bad gradients, not an overflow:
        // the optimizer skips and counts them (and takes this peer out of averaging if they persist)
        if (!(err instanceof LossScaleError)) throw err;
        scalerGaveUp = true;
        observe(collab.skipMicroBatch(err.message));
        continue;
      }
      if (result.skipped) {
        // an fp16 overflow: these gradients are unusable, so the micro-batch adds no samples and no gradients
        log.debug({ lossScale: session.scaler!.scale }, 'fp16 gradients overflowed: micro-batch skipped, loss scale backed off');
        continue;
      }
      if (init.throttle && init.throttle > 1) await sleep((performance.now() - started) * (init.throttle - 1));
      const seconds = (performance.now() - started) / 1000;
      observe(await collab.step(session.grads, batch.batchSize, seconds, result.loss), batch.batchSize / seconds);
    }
    if (halt !== undefined) throw new MemoryLimitError(halt);
    // delay_grad_averaging / delay_optimizer_step: the last epoch's step is still in the background (unless stopping)
    if (!init.signal?.aborted) observe(await collab.flush());
    if (init.out) saveModel(init.out, session.config, session.params);
    return { ...summary, epoch: collab.epoch, samples: collab.contributed.samples, skippedMicroBatches: session.scaler?.skippedSteps ?? 0 };
  } finally {
    watchdog?.stop();
    await collab.stop();
    await session.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
