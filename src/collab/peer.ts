/**
 * A training peer of a collaborative run: its micro-batches from the prepared dataset (its own
 * shard order), forward/backward on the engine, the collaborative optimizer deciding when the swarm
 * steps, and this node's measured metrics in the store for the dashboard.
 */
import { checkConfig, PRESETS, type PresetName } from '../engine/albert/config.js';
import type { Precision } from '../engine/albert/graph.js';
import { saveModel } from '../engine/albert/checkpoint.js';
import { initAlbertParams } from '../engine/albert/params.js';
import { DynamicLossScaler } from '../engine/loss-scaler.js';
import { createOptimizer } from '../engine/optim/index.js';
import { WorkerBackend } from '../engine/worker-backend.js';
import { scaledGradients } from '../engine/trainer.js';
import { DatasetStore, findDataset, openBatchStream, prepareDatasetInWorker } from '../data/index.js';
import type { Logger } from '../log/logger.js';
import { fitMicroBatch, MemoryLimitError, MemoryWatchdog, type RssProbe } from '../node/memory-limit.js';
import { METRIC } from '../node/metric-series.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import { CollaborativeOptimizer, type CollaborativeOptions, type StepOutcome } from './optimizer.js';

export interface PeerInit {
  readonly node: SwarmNode;
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  readonly preset: PresetName;
  /** Micro-batch size (samples per forward/backward); smaller when the memory limit needs it. */
  readonly batchSize: number;
  /**
   * The volunteer's memory limit: the micro-batch shrinks to fit it, training refuses to start when
   * one sample does not fit, and a watchdog stops training when the process stays over it (both
   * reject with MemoryLimitError). Absent: no limit.
   */
  readonly memoryLimitMiB?: number;
  /** Where the memory watchdog reads this process's memory. @default the process's RSS */
  readonly memoryProbe?: RssProbe;
  /** How often the memory watchdog samples. @default WATCHDOG_INTERVAL_MS */
  readonly watchdogIntervalMs?: number;
  readonly seqLen: number;
  /** Seed of the initial weights: every peer of a run uses the same one. */
  readonly seed: number;
  readonly collab: CollaborativeOptions;
  /** Stop after the swarm reaches this epoch. */
  readonly maxEpochs?: number;
  /** onnxruntime threads. */
  readonly threads?: number;
  readonly provider?: 'auto' | 'cpu';
  /** fp32 (default) or fp16 with dynamic loss scaling: an overflowing micro-batch contributes nothing. */
  readonly precision?: Precision;
  /** Save the final model here (config.json + model.safetensors) when training ends. */
  readonly out?: string;
  /** Test-only: run at 1/throttle of this machine's speed (sleeps between micro-batches). */
  readonly throttle?: number;
  readonly signal?: AbortSignal;
  /** Each optimizer outcome, as it happens (CLI summary, dashboard). */
  readonly onOutcome?: (o: StepOutcome, optimizer: CollaborativeOptimizer) => void;
}

export interface PeerSummary {
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

/** Prepares the bundled corpus when the store has no dataset (first start), as the local runtime does. */
export async function ensureDataset(store: Store, dataDir: string, log: Logger): Promise<void> {
  if (new DatasetStore(store.db).list().some((d) => d.complete)) return;
  log.info('preparing the bundled corpus for training (first start only)');
  await prepareDatasetInWorker({ store, dataDir, onWarning: (m) => log.warn(m) });
}

export async function runPeer(init: PeerInit): Promise<PeerSummary> {
  const { node, store, log } = init;
  await ensureDataset(store, init.dataDir, log);
  const config = checkConfig({ ...PRESETS[init.preset], vocabSize: findDataset(store).vocabSize });
  const precision = init.precision ?? 'fp32';
  const limit = init.memoryLimitMiB;
  // refuses (MemoryLimitError) before anything big is allocated
  const batchSize = limit === undefined ? init.batchSize : fitMicroBatch(config, { batchSize: init.batchSize, seqLen: init.seqLen, precision, trainer: 'swarm', delayOptimizerStep: init.collab.delayOptimizerStep === true }, limit, log);
  const data = openBatchStream({ store, batchSize, seqLen: init.seqLen, seed: init.seed, peerId: node.peerId.toString(), onWarning: (m) => log.warn(m) });
  const params = initAlbertParams(config, init.seed);
  const grads = params.zerosLike();
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: init.collab.peakLr });
  const backend = new WorkerBackend(config, { provider: init.provider ?? 'auto', intraOpThreads: init.threads, log, precision });
  const scaler = precision === 'fp16' ? new DynamicLossScaler() : undefined;
  const collab = new CollaborativeOptimizer(node, config, params, optimizer, init.collab, log);
  let watchdog: MemoryWatchdog | undefined;
  const summary = { epoch: 0, steps: 0, losses: [] as Array<{ epoch: number; loss: number }>, averaged: 0, localFallbacks: 0, stateAveraged: 0, loadedState: 0 };
  const observe = (o: StepOutcome | undefined): void => {
    if (!o) return;
    if (o.type === 'stepped') {
      summary.steps++;
      summary.losses.push({ epoch: o.epoch, loss: o.loss });
      if (o.reason) summary.localFallbacks++;
      else if (o.averagedWith > 1) summary.averaged++;
      if (o.stateAveraging && 'averagedWith' in o.stateAveraging) summary.stateAveraged++;
      const at = Date.now();
      store.metrics.record([
        { series: METRIC.loss, value: o.loss, epoch: o.epoch, ts: at },
        { series: METRIC.epoch, value: o.epoch, ts: at },
        { series: METRIC.samples, value: collab.contributed.samples, ts: at },
        { series: METRIC.computeSeconds, value: collab.contributed.seconds, ts: at },
      ]);
    } else if (o.type === 'loaded' && o.donor) summary.loadedState++;
    init.onOutcome?.(o, collab);
  };
  try {
    log.info(`training a ${init.preset} ALBERT (${params.size} parameters) with the swarm on ${data.dataset.source}; target batch size ${init.collab.targetBatchSize}`);
    // a restarted peer keeps its contribution history (its identity is kept by the swarm node)
    observe(await collab.start({ samples: latest(store, METRIC.samples), seconds: latest(store, METRIC.computeSeconds) }));
    let lastMetrics = 0;
    let halt: string | undefined;
    watchdog = limit === undefined ? undefined : new MemoryWatchdog({ limitBytes: limit * 2 ** 20, ...(init.memoryProbe ? { probe: init.memoryProbe } : {}), onExceeded: (reason) => (halt = reason) });
    watchdog?.start(init.watchdogIntervalMs);
    while (halt === undefined && !init.signal?.aborted && (init.maxEpochs === undefined || collab.epoch < init.maxEpochs)) {
      const started = performance.now();
      const batch = (await data.next()).value;
      // delay_optimizer_step: the pending LAMB step is taken on the master parameters meanwhile
      const result = await collab.computeWhileStepping((compute) => scaledGradients(backend, compute, batch, grads, scaler));
      if (result.skipped) {
        // an fp16 overflow: these gradients are unusable, so the micro-batch adds no samples and no gradients
        log.debug({ lossScale: scaler!.scale }, 'fp16 gradients overflowed: micro-batch skipped, loss scale backed off');
        continue;
      }
      if (init.throttle && init.throttle > 1) await sleep((performance.now() - started) * (init.throttle - 1));
      const seconds = (performance.now() - started) / 1000;
      const outcome = await collab.step(grads, batch.batchSize, seconds, result.loss);
      observe(outcome);
      const at = Date.now();
      if (outcome.type === 'accumulated' && at - lastMetrics >= 1000) {
        lastMetrics = at;
        const g = outcome.progress;
        store.metrics.record([
          { series: METRIC.samplesPerSecond, value: batch.batchSize / seconds, ts: at },
          { series: METRIC.swarmSamplesPerSecond, value: g.samplesPerSecond, ts: at },
          { series: METRIC.peersAlive, value: g.peers, ts: at },
          { series: METRIC.samplesAccumulated, value: g.estimatedSamples, ts: at },
          { series: METRIC.targetBatchSize, value: g.targetBatchSize, ts: at },
          ...(Number.isFinite(g.eta) ? [{ series: METRIC.etaSeconds, value: g.eta, ts: at }] : []),
        ]);
      }
    }
    if (halt !== undefined) throw new MemoryLimitError(halt);
    // delay_grad_averaging / delay_optimizer_step: the last epoch's step is still in the background (unless stopping)
    if (!init.signal?.aborted) observe(await collab.flush());
    if (init.out) saveModel(init.out, config, params);
    return { ...summary, epoch: collab.epoch, samples: collab.contributed.samples, skippedMicroBatches: scaler?.skippedSteps ?? 0 };
  } finally {
    watchdog?.stop();
    await collab.stop();
    await data.close();
    await backend.close();
  }
}

function latest(store: Store, series: string): number {
  const row = store.db.prepare("SELECT value FROM metrics WHERE series = ? AND peer = '' ORDER BY ts DESC, rowid DESC LIMIT 1").get(series) as { value: number } | undefined;
  return row?.value ?? 0;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
