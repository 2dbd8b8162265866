/**
 * One training session, whoever drives it (solo training, a swarm peer, `cohort train`): the model's
 * config from the preset and the data's vocabulary, the micro-batch the memory limit allows, the
 * data stream, the parameters (new or from the store's checkpoint), the optimizer, the onnxruntime
 * backend in a worker thread and, for fp16, the loss scaler. The loops differ only in when they step.
 */
import { checkConfig, configFromHf, configToHf, decodeParams, encodeParams, PRESETS, type AlbertBatch, type AlbertConfig, gradNorm, type LocalStep, type ProviderChoice, type TrainingShape, createOptimizer, decodeOptimizerState, DynamicLossScaler, encodeOptimizerState, initAlbertParams, missingCudaProvider, queryGpus, trainStep, WorkerBackend, type Optimizer, type OptimizerKind, type ParameterSet } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import { BadStepCounter } from '../collab/index.js';
import { fitGpuMicroBatch, fitMicroBatch, MemoryWatchdog, type WatchdogOptions } from './memory-limit.js';
import type { DataChoice, TrainerSettings } from './options.js';
import { dataSource, openTrainingData, preparedVocabSize, type TrainingData } from './data.js';
import { NonFiniteTrainingError } from './errors.js';

/** Checkpoint kinds in the store. */
export const MODEL_CHECKPOINT = 'model';
export const OPTIMIZER_CHECKPOINT = 'optimizer';

export interface SessionSpec {
  readonly store: Store;
  readonly log: Logger;
  /** Model, data shape, seed (of new weights and of the data order), precision, micro-batch asked for, peak learning rate. */
  readonly trainer: TrainerSettings;
  readonly provider: ProviderChoice;
  /** onnxruntime intra-op threads. @default one per core */
  readonly threads?: number | undefined;
  /** @default 'lamb' */
  readonly optimizer?: OptimizerKind;
  readonly data: DataChoice;
  /** The prepared dataset to read (the run's). @default the most recently used */
  readonly dataset?: string | undefined;
  /** Shuffles the shared data independently per peer (hivemind's TrainerWithIndependentShuffling). */
  readonly dataPeerId: string;
  /** A vocabulary asked for explicitly; must match prepared data's tokenizer. */
  readonly vocabSize?: number | undefined;
  /**
   * Fit the micro-batch to this limit (MiB; MemoryLimitError when one sample does not fit), and
   * watch the process stay under it while training (`watchMemory`).
   */
  readonly memory?: ({ readonly limitMiB: number; readonly trainer: TrainingShape['trainer']; readonly delayOptimizerStep?: boolean } & WatchdogOptions) | undefined;
  /** Continue from the store's newest checkpoint that fits the data's vocabulary. */
  readonly resume?: boolean;
  readonly onWarning: (message: string) => void;
}

export interface TrainingSession {
  readonly config: AlbertConfig;
  readonly params: ParameterSet;
  /** Reused gradient buffer, one per session. */
  readonly grads: ParameterSet;
  readonly optimizer: Optimizer;
  readonly backend: WorkerBackend;
  /** fp16 only. */
  readonly scaler: DynamicLossScaler | undefined;
  readonly data: TrainingData;
  /** The micro-batch the memory limit allows (≤ the one asked for). */
  readonly batchSize: number;
  /** The optimizer step the parameters are at (0 unless resumed). */
  readonly resumedStep: number;
  /**
   * One step of a loop that trains alone (solo, `cohort train`) at learning rate `lr`. A step with a
   * non-finite loss or gradient is skipped and counted; NonFiniteTrainingError once
   * `trainer.maxBadSteps` come in a row (the parameters themselves went bad, or the learning rate is
   * too high: skipping more would only spin).
   */
  localStep(batch: AlbertBatch, lr: number): Promise<LocalStep>;
  /** Steps skipped for a non-finite loss or gradient so far (fp16 overflows are the scaler's). */
  readonly badSteps: number;
  /**
   * Calls `onExceeded` once when the process stays over the memory limit, until close (nothing
   * without a limit).
   */
  watchMemory(onExceeded: (reason: string) => void): void;
  /**
   * Saves parameters and optimizer state (with the loss scaler's) at `step`, keeping the newest
   * `keep` of each; parameters that are no longer finite are not saved (warned), nor any after
   * NonFiniteTrainingError (weights that give only non-finite losses are not worth keeping), so a
   * restart resumes from the last good checkpoint.
   */
  checkpoint(step: number, keep: number): void;
  close(): Promise<void>;
}

export async function openTrainingSession(spec: SessionSpec): Promise<TrainingSession> {
  const t = spec.trainer;
  const source = dataSource(spec.store, spec.data);
  // the model's vocabulary follows the tokenizer
  const vocabSize = source === 'prepared' ? preparedVocabSize(spec.store, spec.vocabSize, spec.dataset) : (spec.vocabSize ?? PRESETS[t.preset].vocabSize);
  const resumed = spec.resume ? resumeFromStore(spec.store, vocabSize, spec.onWarning) : undefined;
  const config = resumed?.config ?? checkConfig({ ...PRESETS[t.preset], vocabSize });
  // refuses (MemoryLimitError) before anything big is allocated
  const hostFit = spec.memory
    ? fitMicroBatch(config, { batchSize: t.batchSize, seqLen: t.seqLen, precision: t.precision, trainer: spec.memory.trainer, delayOptimizerStep: spec.memory.delayOptimizerStep === true }, spec.memory.limitMiB, spec.log)
    : t.batchSize;
  // on a GPU the activations live in its memory: the micro-batch must fit there too
  const gpu = spec.provider !== 'cpu' && missingCudaProvider() === undefined ? (queryGpus()?.[0] ?? null) : null;
  const batchSize = fitGpuMicroBatch(config, t, hostFit, gpu, spec.log);
  const data = openTrainingData({ source, store: spec.store, cacheKey: spec.dataset, config, batchSize, seqLen: t.seqLen, seed: t.seed, peerId: spec.dataPeerId, onWarning: spec.onWarning });
  try {
    const params = resumed?.params ?? initAlbertParams(config, t.seed);
    // the run's recipe is LAMB's; AdamW (`cohort train --optimizer adamw`) keeps torch's defaults
    const optimizer = createOptimizer(params, spec.optimizer === 'adamw' ? { kind: 'adamw', lr: t.peakLr } : { kind: 'lamb', lr: t.peakLr, betas: [t.adamBeta1, t.adamBeta2], eps: t.adamEpsilon, weightDecay: t.weightDecay, clampValue: t.clampValue });
    const state = resumed?.optimizerState ? decodeOptimizerState(resumed.optimizerState, params) : undefined;
    if (state) optimizer.importState(state);
    const scaler = t.precision === 'fp16' ? new DynamicLossScaler() : undefined;
    if (scaler && state?.lossScaler) scaler.importState(state.lossScaler);
    const backend = new WorkerBackend(config, { provider: spec.provider, intraOpThreads: spec.threads, log: spec.log, precision: t.precision });
    const grads = params.zerosLike();
    const bad = new BadStepCounter(t.maxBadSteps);
    let watchdog: MemoryWatchdog | undefined;
    return {
      config,
      params,
      grads,
      optimizer,
      backend,
      scaler,
      data,
      batchSize,
      resumedStep: resumed?.step ?? 0,
      get badSteps() {
        return bad.total;
      },
      async localStep(batch, lr) {
        const result = await trainStep(backend, optimizer, params, grads, batch, lr, t.maxGradNorm, scaler);
        if (result.skipped !== 'non-finite') {
          bad.reset();
          return result;
        }
        const atLimit = bad.add();
        spec.log.warn(`skipped a step: its loss is ${result.loss}${Number.isFinite(result.loss) ? ' but a gradient is not finite' : ''} (${bad.inARow} in a row, ${bad.total} in total)`);
        if (atLimit) throw new NonFiniteTrainingError(bad.inARow, t.peakLr);
        return result;
      },
      watchMemory(onExceeded) {
        if (!spec.memory) return;
        watchdog?.stop();
        watchdog = new MemoryWatchdog({ limitBytes: spec.memory.limitMiB * 2 ** 20, probe: spec.memory.memoryProbe, onExceeded });
        watchdog.start(spec.memory.watchdogIntervalMs);
      },
      checkpoint(step, keep) {
        if (bad.atLimit) return;
        if (!Number.isFinite(gradNorm(params))) return spec.log.warn(`not checkpointing step ${step}: the parameters are no longer finite`);
        spec.store.checkpoints.save({ kind: MODEL_CHECKPOINT, epoch: step, meta: { config: configToHf(config) }, data: encodeParams(params), keep });
        spec.store.checkpoints.save({ kind: OPTIMIZER_CHECKPOINT, epoch: step, data: encodeOptimizerState({ ...optimizer.exportState(), ...(scaler ? { lossScaler: scaler.exportState() } : {}) }), keep });
      },
      async close() {
        watchdog?.stop();
        await data.close();
        await backend.close();
      },
    };
  } catch (err) {
    await data.close();
    throw err;
  }
}

/** The newest model checkpoint that verifies and fits this vocabulary, with its optimizer state. */
function resumeFromStore(store: Store, vocabSize: number, warn: (m: string) => void): { config: AlbertConfig; params: ParameterSet; step: number; optimizerState?: Uint8Array } | undefined {
  const { checkpoints } = store;
  const model = checkpoints.loadLatest(MODEL_CHECKPOINT, (e) => warn(`skipping a damaged checkpoint: ${e.message}`));
  if (!model) return undefined;
  const config = configFromHf(model.info.meta.config, `checkpoint ${model.info.id}`);
  if (config.vocabSize !== vocabSize) {
    warn(`the stored model has a vocabulary of ${config.vocabSize}, the dataset ${vocabSize}: starting a new model`);
    return undefined;
  }
  const { params } = decodeParams(config, model.data, `checkpoint ${model.info.id}`);
  const optimizer = checkpoints.list(OPTIMIZER_CHECKPOINT).find((c) => c.epoch === model.info.epoch);
  return { config, params, step: model.info.epoch, optimizerState: optimizer ? checkpoints.load(optimizer.id).data : undefined };
}
