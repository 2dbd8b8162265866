/**
 * A training peer of a collaborative run: its micro-batches from the prepared dataset (its own
 * shard order), forward/backward on the engine, and the collaborative optimizer deciding when the
 * swarm steps. What happens is reported as training events.
 */
import { CollaborativeOptimizer, describeRunData, type CollaborativeOptions, type RunData, type StepOutcome } from '../collab/index.js';
import { saveModel, scaledGradients } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import type { EmitTrainingEvent } from './events.js';
import { MemoryLimitError, MemoryWatchdog, type WatchdogOptions } from './memory-limit.js';
import type { TrainerSettings } from './options.js';
import { ShardServer } from '../shards/index.js';
import { pinsOf, runDataset } from './run-data.js';
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
  /** The run's data: fetched from the swarm when this store lacks it; null: the run pins none (this store's own is used). */
  readonly data: RunData | null;
  readonly collab: Omit<CollaborativeOptions, 'data'>;
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
}

export async function runSwarmPeer(init: SwarmPeerInit): Promise<SwarmPeerSummary> {
  const { node, store, log, trainer: t } = init;
  const sink = new TrainingSink(store, log);
  const emit: EmitTrainingEvent = (e) => {
    sink.handle(e);
    init.emit?.(e);
  };
  const dataset = await runDataset({ node, store, dataDir: init.dataDir, log, data: init.data, signal: init.signal });
  const pins = pinsOf(dataset);
  log.info(`training on ${describeRunData(pins)}`);
  const limit = init.memoryLimitMiB;
  const session = await openTrainingSession({
    store,
    log,
    trainer: t,
    provider: init.provider ?? 'auto',
    threads: init.threads,
    data: 'prepared',
    dataset: dataset.cacheKey,
    dataPeerId: node.peerId.toString(),
    memory: limit === undefined ? undefined : { limitMiB: limit, trainer: 'swarm', delayOptimizerStep: init.collab.delayOptimizerStep === true || init.collab.delayGradAveraging === true },
    onWarning: (m) => log.warn(m),
  });
  const collab = new CollaborativeOptimizer(node, session.config, session.params, session.optimizer, { ...init.collab, data: pins }, log, (round, event) => emit({ type: 'averaging', round, event, at: Date.now() }));
  let watchdog: MemoryWatchdog | undefined;
  const summary = { epoch: 0, steps: 0, losses: [] as Array<{ epoch: number; loss: number }>, averaged: 0, localFallbacks: 0, stateAveraged: 0, loadedState: 0 };
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
    else if (o.type === 'accumulated' && samplesPerSecond !== undefined) {
      const g = o.progress;
      emit({ type: 'progress', samplesPerSecond, swarm: { epoch: g.epoch, peers: g.peers, samplesPerSecond: g.samplesPerSecond, samplesAccumulated: g.estimatedSamples, targetBatchSize: g.targetBatchSize, etaSeconds: Number.isFinite(g.eta) ? g.eta : null }, at });
    }
  };
  // every peer holding the data serves it, so newcomers do not all fetch from the founder
  const shards = new ShardServer(node, store, log);
  // in the background: its first advertisement is a DHT store, which training need not wait for
  const serving = shards.start().catch((err: unknown) => log.warn(`could not serve the run's data to other peers: ${(err as Error).message}`));
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
      const result = await collab.computeWhileStepping((compute) => scaledGradients(session.backend, compute, batch, session.grads, session.scaler));
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
    await serving;
    await shards.stop();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
