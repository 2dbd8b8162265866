/**
 * Training on this machine alone: what Start does until this node joins a swarm. The bundled corpus is
 * prepared on first start, the model and optimizer resume from the store's latest checkpoints, and
 * every figure it reports was measured.
 */
import { linearWarmupDecay } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import type { PrepareOptions } from '../data/index.js';
import type { Store } from '../store/index.js';
import { ensureDataset } from './data.js';
import type { HaltCause, TrainingEvent } from './events.js';
import { MemoryLimitError, type WatchdogOptions } from './memory-limit.js';
import { openTrainingSession } from './session.js';
import { TrainingSink } from './sink.js';
import type { TrainingService, TrainingSettings } from './service.js';
import type { TrainerSettings } from './options.js';

export interface SoloTrainingInit extends WatchdogOptions {
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  readonly trainer: TrainerSettings;
  /** How to prepare data when the store has none (the bundled corpus by default). */
  readonly prepare?: Partial<Omit<PrepareOptions, 'store' | 'dataDir'>>;
}

export class SoloTraining implements TrainingService {
  private settings: TrainingSettings | undefined;
  private readonly listeners = new Set<(e: TrainingEvent) => void>();
  private readonly sink: TrainingSink;
  private loop: Promise<void> | undefined;
  private stopRequested = false;
  /** Why training stopped itself (the memory watchdog, an error); reported when the loop has wound down. */
  private halt: { cause: HaltCause; reason: string } | undefined;

  constructor(private readonly init: SoloTrainingInit) {
    this.sink = new TrainingSink(init.store, init.log);
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
        this.halt = err instanceof MemoryLimitError ? { cause: 'memory', reason: err.message } : { cause: 'error', reason: `local training stopped: ${(err as Error).message}` };
      })
      .finally(() => {
        this.loop = undefined;
        if (this.halt !== undefined) this.emit({ type: 'halted', ...this.halt, at: Date.now() });
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
    const { store, log, trainer: t } = this.init;
    await ensureDataset(store, this.init.dataDir, log, this.init.prepare);
    const policies = this.settings?.policies;
    const limitMiB = policies?.maxMemoryMiB ?? t.maxMemoryMiB;
    const session = await openTrainingSession({
      store,
      log,
      // the volunteer's setting; a node started without settings uses its own option
      trainer: { ...t, precision: policies?.precision ?? t.precision },
      provider: policies?.useGpu === false ? 'cpu' : 'auto',
      threads: policies?.maxCpuThreads,
      data: 'prepared',
      dataPeerId: 'local',
      memory: { limitMiB, trainer: 'local', memoryProbe: this.init.memoryProbe, watchdogIntervalMs: this.init.watchdogIntervalMs },
      resume: true,
      onWarning: (m) => log.warn(m),
    });
    let step = session.resumedStep;
    log.info(step > 0 ? `resumed from the checkpoint of step ${step}` : `training a new ${t.preset} ALBERT (${session.params.size} parameters) on ${session.data.description}`);
    const contributed = this.sink.contributed();
    let rate: number | undefined;
    session.watchMemory((reason) => {
      this.halt = { cause: 'memory', reason };
      this.stopRequested = true;
    });
    try {
      while (!this.stopRequested) {
        const started = performance.now();
        const batch = await session.data.next();
        const lr = linearWarmupDecay(step + 1, { peakLr: t.peakLr, warmupSteps: t.warmupSteps, totalSteps: t.totalSteps });
        const result = await session.localStep(batch, lr);
        if (result.skipped === 'non-finite') this.emit({ type: 'skipped', reason: `its loss is ${result.loss} or a gradient is not finite`, total: session.badSteps, at: Date.now() });
        // nothing was learned from this batch (an fp16 overflow: the scaler has backed off)
        if (result.skipped) continue;
        step++;
        const seconds = (performance.now() - started) / 1000;
        rate = rate === undefined ? batch.batchSize / seconds : 0.9 * rate + (0.1 * batch.batchSize) / seconds; // EMA like hivemind's performance_ema
        contributed.samples += batch.batchSize;
        contributed.seconds += seconds;
        const at = Date.now();
        this.emit({ type: 'stepped', epoch: step, loss: result.loss, alone: true, contributed: { ...contributed }, at });
        // alone, every batch is a whole step: nothing carries over, and the next step is one batch away
        this.emit({ type: 'progress', samplesPerSecond: rate, swarm: { epoch: step, peers: 1, samplesPerSecond: rate, samplesAccumulated: 0, targetBatchSize: session.batchSize, etaSeconds: batch.batchSize / rate }, at });
        if (step % t.checkpointEvery === 0) session.checkpoint(step, t.keepCheckpoints);
      }
    } finally {
      // refused after NonFiniteTrainingError: a restart resumes from the last good checkpoint
      session.checkpoint(step, t.keepCheckpoints);
      await session.close();
    }
  }

  private emit(event: TrainingEvent): void {
    this.sink.handle(event);
    for (const l of this.listeners) l(event);
  }
}
