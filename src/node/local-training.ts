import type { Logger } from '../log/logger.js';
import { checkConfig, PRESETS, type AlbertConfig, type PresetName } from '../engine/albert/config.js';
import { decodeParams, encodeParams } from '../engine/albert/checkpoint.js';
import { configFromHf, configToHf } from '../engine/albert/config.js';
import { initAlbertParams } from '../engine/albert/params.js';
import type { Precision } from '../engine/albert/graph.js';
import { DynamicLossScaler } from '../engine/loss-scaler.js';
import { createOptimizer, decodeOptimizerState, encodeOptimizerState, LAMB_DEFAULTS, linearWarmupDecay, type Optimizer } from '../engine/optim/index.js';
import { WorkerBackend } from '../engine/worker-backend.js';
import type { ParameterSet } from '../engine/params.js';
import { trainStep } from '../engine/trainer.js';
import { DatasetStore, findDataset, openBatchStream, prepareDatasetInWorker, type BatchStream, type PrepareOptions } from '../data/index.js';
import { DEFAULT_SETTINGS } from '../shared/settings-schema.js';
import type { Store } from '../store/index.js';
import { fitMicroBatch, MemoryLimitError, MemoryWatchdog, type RssProbe } from './memory-limit.js';
import { METRIC } from './metric-series.js';
import type { TrainingEvent, TrainingRuntime, TrainingSettings } from './runtime-parts.js';

export interface LocalTrainingInit {
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** @default 'tiny' */
  readonly preset?: PresetName;
  /** @default 8 */
  readonly batchSize?: number;
  /** @default 128 */
  readonly seqLen?: number;
  /** Optimizer steps between checkpoints. @default 50 */
  readonly checkpointEvery?: number;
  /** Checkpoints of each kind kept in the store. @default 3 */
  readonly keepCheckpoints?: number;
  readonly warmupSteps?: number;
  readonly totalSteps?: number;
  /** fp16: mixed precision with dynamic loss scaling (its state checkpointed with the optimizer's). @default 'fp32' */
  readonly precision?: Precision;
  /** How to prepare data when the store has none (the bundled corpus by default). */
  readonly prepare?: Partial<Omit<PrepareOptions, 'store' | 'dataDir'>>;
  /** Where the memory watchdog reads this process's memory. @default the process's RSS */
  readonly memoryProbe?: RssProbe;
  /** How often the memory watchdog samples. @default WATCHDOG_INTERVAL_MS */
  readonly watchdogIntervalMs?: number;
}

/** Checkpoint kinds in the store. */
export const MODEL_CHECKPOINT = 'model';
export const OPTIMIZER_CHECKPOINT = 'optimizer';

interface Session {
  readonly config: AlbertConfig;
  readonly params: ParameterSet;
  readonly grads: ParameterSet;
  readonly optimizer: Optimizer;
  readonly backend: WorkerBackend;
  /** fp16 only. */
  readonly scaler: DynamicLossScaler | undefined;
  readonly data: BatchStream;
  /** The micro-batch the memory limit allows (≤ the configured one). */
  readonly batchSize: number;
  step: number;
}

/**
 * Trains ALBERT on this machine alone: the bundled corpus (prepared on first start), the model and
 * optimizer resumed from the store's latest checkpoints, metrics recorded in the store for the
 * dashboard. It is what "Start" does until this node joins a swarm, and it never invents numbers:
 * every figure it records was measured.
 */
export class LocalTrainingRuntime implements TrainingRuntime {
  private settings: TrainingSettings | undefined;
  private readonly listeners = new Set<(e: TrainingEvent) => void>();
  private loop: Promise<void> | undefined;
  private stopRequested = false;
  private readonly o: Required<Omit<LocalTrainingInit, 'store' | 'dataDir' | 'log' | 'prepare' | 'memoryProbe' | 'watchdogIntervalMs'>>;
  /** Why training stopped itself (the memory watchdog); reported when the loop has wound down. */
  private halt: string | undefined;

  constructor(private readonly init: LocalTrainingInit) {
    this.o = { preset: 'tiny', batchSize: 8, seqLen: 128, checkpointEvery: 50, keepCheckpoints: 3, warmupSteps: 500, totalSteps: 100_000, precision: 'fp32', ...init };
  }

  configure(settings: TrainingSettings): void {
    this.settings = settings; // threads and GPU choice apply from the next start
  }

  async start(): Promise<void> {
    if (this.loop) return;
    this.stopRequested = false;
    this.halt = undefined;
    this.loop = this.run()
      .catch((err: unknown) => {
        if (err instanceof MemoryLimitError) this.halt = err.message;
        else this.say('error', `local training stopped: ${(err as Error).message}`);
      })
      .finally(() => {
        this.loop = undefined;
        if (this.halt === undefined) return;
        this.say('warn', `training stopped: ${this.halt}`);
        this.emit({ type: 'halted', reason: this.halt, at: Date.now() });
      });
  }

  async pause(): Promise<void> {
    this.stopRequested = true;
    await this.loop;
  }

  subscribe(listener: (event: TrainingEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async run(): Promise<void> {
    const session = await this.open();
    const { store } = this.init;
    const totals = { samples: latest(store, METRIC.samples), seconds: latest(store, METRIC.computeSeconds) };
    let rate: number | undefined;
    const watchdog = new MemoryWatchdog({
      limitBytes: this.memoryLimitMiB() * 2 ** 20,
      ...(this.init.memoryProbe ? { probe: this.init.memoryProbe } : {}),
      onExceeded: (reason) => {
        this.halt = reason;
        this.stopRequested = true;
      },
    });
    watchdog.start(this.init.watchdogIntervalMs);
    try {
      while (!this.stopRequested) {
        const started = performance.now();
        const batch = (await session.data.next()).value;
        const lr = linearWarmupDecay(session.step + 1, { peakLr: LAMB_DEFAULTS.lr, warmupSteps: this.o.warmupSteps, totalSteps: this.o.totalSteps });
        const result = await trainStep(session.backend, session.optimizer, session.params, session.grads, batch, lr, 1, session.scaler);
        // an fp16 overflow: nothing was learned from this batch (the scaler has backed off)
        if (result.skipped) continue;
        session.step++;
        const seconds = (performance.now() - started) / 1000;
        rate = rate === undefined ? batch.batchSize / seconds : 0.9 * rate + (0.1 * batch.batchSize) / seconds; // EMA like hivemind's performance_ema
        totals.samples += batch.batchSize;
        totals.seconds += seconds;
        const at = Date.now();
        store.metrics.record([
          { series: METRIC.loss, value: result.loss, epoch: session.step, ts: at },
          { series: METRIC.samplesPerSecond, value: rate, ts: at },
          { series: METRIC.swarmSamplesPerSecond, value: rate, ts: at },
          { series: METRIC.epoch, value: session.step, ts: at },
          { series: METRIC.peersAlive, value: 1, ts: at },
          { series: METRIC.targetBatchSize, value: session.batchSize, ts: at },
          // alone, every batch is a whole step: nothing carries over, and the next step is one batch away
          { series: METRIC.samplesAccumulated, value: 0, ts: at },
          { series: METRIC.etaSeconds, value: batch.batchSize / rate, ts: at },
          { series: METRIC.samples, value: totals.samples, ts: at },
          { series: METRIC.computeSeconds, value: totals.seconds, ts: at },
        ]);
        this.emit({ type: 'progress', swarm: { epoch: session.step, lastLoss: result.loss, samplesPerSecond: rate, peersAlive: 1, samplesAccumulated: 0, targetBatchSize: session.batchSize, etaSeconds: batch.batchSize / rate }, at });
        if (session.step % 10 === 0) this.say('info', `Step #${session.step}, loss ${result.loss.toFixed(3)} (training alone: this node has not joined a swarm)`);
        if (session.step % this.o.checkpointEvery === 0) this.checkpoint(session);
      }
    } finally {
      watchdog.stop();
      this.checkpoint(session);
      await session.data.close();
      await session.backend.close();
    }
  }

  private async open(): Promise<Session> {
    const { store, dataDir } = this.init;
    if (!new DatasetStore(store.db).list().some((d) => d.complete)) {
      this.say('info', 'preparing the bundled corpus for training (first start only)');
      await prepareDatasetInWorker({ ...this.init.prepare, store, dataDir, onWarning: (m) => this.say('warn', m) });
    }
    const { vocabSize } = findDataset(store);
    const resumed = this.resume(vocabSize);
    const config = resumed?.config ?? checkConfig({ ...PRESETS[this.o.preset], vocabSize });
    // the volunteer's setting; a node started without settings uses its own option
    const precision = this.settings?.policies.precision ?? this.o.precision;
    // refuses (MemoryLimitError) before anything big is allocated
    const batchSize = fitMicroBatch(config, { batchSize: this.o.batchSize, seqLen: this.o.seqLen, precision, trainer: 'local' }, this.memoryLimitMiB(), this.init.log);
    const data = openBatchStream({ store, batchSize, seqLen: this.o.seqLen, seed: 0, peerId: 'local', onWarning: (m) => this.say('warn', m) });
    try {
      const params = resumed?.params ?? initAlbertParams(config, 0);
      const optimizer = createOptimizer(params, { kind: 'lamb' });
      const state = resumed?.optimizerState ? decodeOptimizerState(resumed.optimizerState, params) : undefined;
      if (state) optimizer.importState(state);
      const scaler = precision === 'fp16' ? new DynamicLossScaler() : undefined;
      if (scaler && state?.lossScaler) scaler.importState(state.lossScaler);
      const policies = this.settings?.policies;
      const backend = new WorkerBackend(config, { provider: policies?.useGpu === false ? 'cpu' : 'auto', intraOpThreads: policies?.maxCpuThreads, log: this.init.log, precision });
      const step = resumed?.step ?? 0;
      this.say('info', resumed ? `resumed from the checkpoint of step ${step}` : `training a new ${this.o.preset} ALBERT (${params.size} parameters) on ${data.dataset.source}`);
      return { config, params, grads: params.zerosLike(), optimizer, backend, scaler, data, batchSize, step };
    } catch (err) {
      await data.close();
      throw err;
    }
  }

  /** The newest model checkpoint that verifies and fits this dataset's vocabulary, with its optimizer state. */
  private resume(vocabSize: number): { config: AlbertConfig; params: ParameterSet; step: number; optimizerState?: Uint8Array } | undefined {
    const { checkpoints } = this.init.store;
    const model = checkpoints.loadLatest(MODEL_CHECKPOINT, (e) => this.say('warn', `skipping a damaged checkpoint: ${e.message}`));
    if (!model) return undefined;
    const config = configFromHf(model.info.meta.config as Record<string, unknown>, `checkpoint ${model.info.id}`);
    if (config.vocabSize !== vocabSize) {
      this.say('warn', `the stored model has a vocabulary of ${config.vocabSize}, the dataset ${vocabSize}: starting a new model`);
      return undefined;
    }
    const { params } = decodeParams(config, model.data, `checkpoint ${model.info.id}`);
    const optimizer = checkpoints.list(OPTIMIZER_CHECKPOINT).find((c) => c.epoch === model.info.epoch);
    return { config, params, step: model.info.epoch, optimizerState: optimizer ? checkpoints.load(optimizer.id).data : undefined };
  }

  private checkpoint(s: Session): void {
    const keep = this.o.keepCheckpoints;
    this.init.store.checkpoints.save({ kind: MODEL_CHECKPOINT, epoch: s.step, meta: { config: configToHf(s.config) }, data: encodeParams(s.params), keep });
    this.init.store.checkpoints.save({ kind: OPTIMIZER_CHECKPOINT, epoch: s.step, data: encodeOptimizerState({ ...s.optimizer.exportState(), ...(s.scaler ? { lossScaler: s.scaler.exportState() } : {}) }), keep });
  }

  private memoryLimitMiB(): number {
    return this.settings?.policies.maxMemoryMiB ?? DEFAULT_SETTINGS.policies.maxMemoryMiB;
  }

  private emit(event: TrainingEvent): void {
    for (const l of this.listeners) l(event);
  }

  /** The node's logger reaches stderr and the dashboard's log panel. */
  private say(level: 'info' | 'warn' | 'error', msg: string): void {
    this.init.log[level](msg);
  }
}

function latest(store: Store, series: string): number {
  const row = store.db.prepare("SELECT value FROM metrics WHERE series = ? AND peer = '' ORDER BY ts DESC, rowid DESC LIMIT 1").get(series) as { value: number } | undefined;
  return row?.value ?? 0;
}
