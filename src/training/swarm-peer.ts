/**
 * A training peer of a collaborative run: its micro-batches from the prepared dataset (its own
 * shard order), forward/backward on the engine, and the collaborative optimizer deciding when the
 * swarm steps. What happens is reported as training events. The peer keeps its full state in its
 * store every few minutes of training and on stop, and a peer restarted on its data directory
 * continues from it when the swarm is not ahead (full-state.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { keepOffences } from '../averaging/index.js';
import { averagingModeOf, CollaborativeOptimizer, DATA_MISMATCH_ADVICE, describeRunData, FullStateSaver, loadNewestRunState, PEER_STATE_CHECKPOINT, TrainingStateError, type CollaborativeOptions, type RunData, type RunParams, type StepOutcome, type TrainingState } from '../collab/index.js';
import { configToHf, LOSS_SCALER_DEFAULTS, LossScaleError, saveModel, scaledGradients, type ParameterSet } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import type { EmitTrainingEvent } from './events.js';
import { MemoryLimitError, type WatchdogOptions } from './memory-limit.js';
import { DEFAULT_SAVE_STATE_MINUTES, type TrainerSettings } from './options.js';
import { serveShards, ShardRotation } from '../shards/index.js';
import { pinsOf, runDataset } from './run-data.js';
import { openTrainingSession, type TrainingSession } from './session.js';
import { TrainingSink } from './sink.js';
import { writeFolderWhole } from '../util/output-path.js';

/** The peer's own full-state checkpoints kept (the newest and one before it, should it be damaged). */
const KEPT_STATES = 2;

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
  /** Hold at most this many bytes of the run's fetched shards, swapping those trained on for others (src/shards/rotation.ts). @default all of them */
  readonly cacheQuotaBytes?: number | undefined;
  readonly collab: Omit<CollaborativeOptions, 'data'>;
  /** The run's signed record, kept in this peer's checkpoints (a restart resumes only a checkpoint of the same record). */
  readonly run?: RunParams | undefined;
  /** Found the run from this state (`cohort run --resume-from`) instead of new weights or this peer's checkpoint. */
  readonly resumeFrom?: TrainingState | undefined;
  /** Save the full state after an epoch ends once this many minutes passed since the last save, and on stop; 0: after every epoch. @default DEFAULT_SAVE_STATE_MINUTES */
  readonly saveStateMinutes?: number | undefined;
  /** Test-only: the N-th full-state save stops mid-write for a while (FullStateSaver's pauseSave). */
  readonly faultPauseStateSave?: number | undefined;
  /** Stop after the swarm reaches this epoch. */
  readonly maxEpochs?: number | undefined;
  /** onnxruntime threads. */
  readonly threads?: number | undefined;
  readonly provider?: 'auto' | 'cpu';
  /** Save the final model here (config.json + model.safetensors) when training ends. */
  readonly out?: string | undefined;
  /** Test-only: run at 1/throttle of this machine's speed (sleeps between micro-batches). */
  readonly throttle?: number | undefined;
  /**
   * Testing (the swarm lab, bench/swarm-lab.ts): no forward/backward; each micro-batch takes
   * batch size ÷ this many seconds (a sleep) and yields a random gradient of the model's size, so many
   * peers share a few cores while their averaging moves real bytes. The loss reported is ln(vocabulary).
   */
  readonly simulatedCompute?: number | undefined;
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
  /**
   * Seconds this run spent computing micro-batches, and from the end of its first micro-batch to its
   * last step: their ratio is its compute utilisation. The first micro-batch is in neither: it builds
   * the onnxruntime session (graph and kernels, seconds of start-up that are not training).
   */
  readonly computeSeconds: number;
  readonly trainingSeconds: number;
  /** fp16 micro-batches dropped because their gradients overflowed. */
  readonly skippedMicroBatches: number;
  /** Micro-batches dropped because their loss or gradients were not finite (beyond what the fp16 scaler handles). */
  readonly badMicroBatches: number;
  /** Steps that left non-finite parameters, undone by restoring the in-memory backup. */
  readonly restoredBackups: number;
}

export async function runSwarmPeer(init: SwarmPeerInit): Promise<SwarmPeerSummary> {
  const { node, store, log, trainer: t } = init;
  const sink = new TrainingSink(store, log, averagingModeOf(init.collab));
  const emit: EmitTrainingEvent = (e) => {
    sink.handle(e);
    init.emit?.(e);
  };
  const dataset = await runDataset({ ...init, quotaBytes: init.cacheQuotaBytes, onProgress: (p) => emit({ type: 'data-fetch', progress: p, at: Date.now() }) });
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
    memory: limit === undefined ? undefined : { limitMiB: limit, trainer: 'swarm', delayOptimizerStep: init.collab.delayOptimizerStep === true || init.collab.delayGradAveraging === true, memoryProbe: init.memoryProbe, watchdogIntervalMs: init.watchdogIntervalMs },
    onWarning: (m) => log.warn(m),
  });
  const resumed = init.resumeFrom ? resumeFrom(init.resumeFrom, session, 'the state given (--resume-from)') : resumeOwnState(init, session);
  keepOffences(node, store.offences.forRun(node.runId)); // bans this node made in the run outlive a restart
  /** This peer's samples/s over its latest micro-batch ("my throughput"), set before the optimizer sees it. */
  let microBatchRate = 0;
  let reportsKept: readonly unknown[] | undefined;
  const collab = new CollaborativeOptimizer(node, session.config, session.params, session.optimizer, { ...init.collab, data: pins }, log, {
    averaging: (round, event) => emit({ type: 'averaging', round, event, at: Date.now() }),
    progress: (g) => {
      // the dashboard's peers table: each peer's throughput, and when it was last heard from
      if (collab.peerReports !== reportsKept) store.peers.reported((reportsKept = collab.peerReports));
      emit({ type: 'progress', samplesPerSecond: microBatchRate, swarm: { epoch: g.epoch, peers: g.peers, samplesPerSecond: g.samplesPerSecond, samplesAccumulated: g.samples, targetBatchSize: g.targetBatchSize, etaSeconds: Number.isFinite(g.eta) ? g.eta : null }, at: Date.now() });
    },
  });
  const saver = new FullStateSaver(store, log, { pauseSave: init.faultPauseStateSave });
  const savePeriodMs = (init.saveStateMinutes ?? DEFAULT_SAVE_STATE_MINUTES) * 60_000;
  let lastSave = performance.now();
  let savedEpoch = resumed?.epoch ?? 0;
  let writing: Promise<void> = Promise.resolve();
  /** Snapshots the state (awaited: nothing may step meanwhile) and writes it in the background. */
  const saveState = async (): Promise<void> => {
    const state = collab.stateToSave();
    const { epoch } = state;
    if (epoch === savedEpoch) return;
    const save = saver.save(PEER_STATE_CHECKPOINT, { ...state, config: session.config, optimizer: session.optimizer, scaler: session.scaler }, { runId: node.runId, ...(init.run ? { run: init.run } : {}) }, KEPT_STATES);
    if (!save) return; // the previous save is still being written: the next epoch tries again
    lastSave = performance.now();
    savedEpoch = epoch;
    await save.snapshotted;
    writing = save.written.then(
      (info) => log.info(`saved this peer's state of epoch ${info.epoch} (${(info.size / 2 ** 20).toFixed(1)} MiB) in ${store.checkpoints.file}`),
      (err: unknown) => log.warn(`could not save this peer's state of epoch ${epoch}: ${(err as Error).message}`),
    );
  };
  const summary = { epoch: 0, steps: 0, losses: [] as Array<{ epoch: number; loss: number }>, averaged: 0, localFallbacks: 0, stateAveraged: 0, loadedState: 0, badMicroBatches: 0, restoredBackups: 0 };
  /** The fp16 loss scaler backed off as far as it can: gradients are non-finite at any scale (see below). */
  let scalerGaveUp = false;
  const observe = (o: StepOutcome | undefined): void => {
    if (!o) return;
    const at = Date.now();
    if (o.type === 'stepped') {
      summary.steps++;
      summary.losses.push({ epoch: o.epoch, loss: o.loss });
      if (o.reason) summary.localFallbacks++;
      else if (o.averagedWith > 1) summary.averaged++;
      if (o.stateAveraging && 'averagedWith' in o.stateAveraging) summary.stateAveraged++;
      emit({ type: 'stepped', epoch: o.epoch, loss: o.loss, alone: false, contributed: collab.contributed, at });
      if (o.dataMismatch) emit({ type: 'data-mismatch', reason: o.reason!, advice: DATA_MISMATCH_ADVICE, at });
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
  };
  // every peer holding the data serves it, so newcomers do not all fetch from the founder
  const shards = serveShards(node, store, log);
  // in the background: its first advertisement is a DHT store, which training need not wait for
  const serving = shards.ready.catch((err: unknown) => log.warn(`could not serve the run's data to other peers: ${(err as Error).message}`));
  // a peer holding part of the run's data (fetched within its quota) swaps the shards it trained on for others
  const rotation = init.cacheQuotaBytes !== undefined && dataset.manifest !== null ? new ShardRotation(node, store, { cacheKey: dataset.cacheKey, quotaBytes: init.cacheQuotaBytes, dataDir: init.dataDir, log, advertise: () => shards.advertise() }) : undefined;
  const unsubscribe = rotation && session.data.onShardsTrained?.((seqs) => rotation.trained(seqs));
  // simulated compute: a fresh model's loss, ln(vocabulary), every micro-batch
  const loss0 = Math.log(session.config.vocabSize);
  try {
    if (init.simulatedCompute !== undefined) log.warn(`simulated compute (testing): ${init.simulatedCompute} samples/s, random gradients, no forward/backward`);
    log.info(`training a ${t.preset} ALBERT (${session.params.size} parameters) with the swarm on ${session.data.description}; target batch size ${init.collab.targetBatchSize}`);
    // a restarted peer keeps its contribution history (its identity is kept by the swarm node)
    // DiLoCo: the checkpoint's outer momentum with its θ_start (a state given by --resume-from has none)
    observe(await collab.start({ ...sink.contributed(), ...resumed }));
    let halt: string | undefined;
    session.watchMemory((reason) => (halt = reason));
    let computedBefore = collab.contributed.seconds;
    let trainingStarted: number | undefined;
    while (halt === undefined && !init.signal?.aborted && (init.maxEpochs === undefined || collab.epoch < init.maxEpochs)) {
      const started = performance.now();
      const batch = await session.data.next();
      // delay_optimizer_step: the pending LAMB step is taken on the master parameters meanwhile
      let result: { readonly loss: number; readonly skipped: boolean };
      try {
        const simulated = init.simulatedCompute;
        result = await collab.computeWhileStepping<{ readonly loss: number; readonly skipped: boolean }>((compute) => (simulated === undefined ? scaledGradients(session.backend, compute, batch, session.grads, session.scaler) : simulatedGradients(session.grads, batch.batchSize / simulated, loss0)));
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
      microBatchRate = batch.batchSize / seconds;
      const outcome = await collab.step(session.grads, batch.batchSize, seconds, result.loss);
      observe(outcome);
      if (trainingStarted === undefined) {
        trainingStarted = performance.now();
        computedBefore = collab.contributed.seconds;
      }
      if (outcome.type === 'stepped' && performance.now() - lastSave >= savePeriodMs) await saveState();
    }
    if (halt !== undefined) throw new MemoryLimitError(halt);
    if (init.maxEpochs !== undefined && collab.epoch >= init.maxEpochs) log.info(`stopping: the swarm reached epoch ${collab.epoch}, --max-epochs ${init.maxEpochs}${trainingStarted === undefined ? ' (it was there before this peer computed anything)' : ''}`);
    // delay_grad_averaging / delay_optimizer_step: the last epoch's step is still in the background (unless stopping)
    if (!init.signal?.aborted) observe(await collab.flush());
    const trainingSeconds = trainingStarted === undefined ? 0 : (performance.now() - trainingStarted) / 1000; // saving the state and the model is not training
    await writing;
    await saveState();
    await writing;
    const out = init.out;
    if (out) writeFolderWhole(out, (dir) => saveModel(dir, session.config, session.params));
    return { ...summary, epoch: collab.epoch, samples: collab.contributed.samples, computeSeconds: collab.contributed.seconds - computedBefore, trainingSeconds, skippedMicroBatches: session.scaler?.skippedSteps ?? 0 };
  } finally {
    await writing;
    await saver.close();
    await collab.stop();
    await session.close();
    unsubscribe?.();
    await rotation?.stop();
    await serving;
    await shards.release();
  }
}

/**
 * Loads the newest full-state checkpoint of the run this data directory holds (this peer's, or its
 * coordinator's) into the session (parameters, optimizer, loss scaler) and returns its epoch and outer momentum; undefined when there is none that fits
 * (another run record, another model), which is logged.
 */
function resumeOwnState(init: SwarmPeerInit, session: TrainingSession): Resumed | undefined {
  const { store, log, node } = init;
  // a checkpoint of another run founded under this id is passed over: this run's newest older one resumes;
  // a coordinator on this data directory (the app's switch beside Start) checkpoints the run too: the newer goes on
  const own = loadNewestRunState(store, node.runId, init.run, log);
  if (!own) return undefined;
  const { state } = own;
  const where = `${own.info.kind === PEER_STATE_CHECKPOINT ? "this peer's" : "this node's coordinator"} checkpoint of epoch ${state.epoch} (${store.checkpoints.file})`;
  if (!sameModel(state, session)) {
    log.warn(`${where} holds another model (${JSON.stringify(configToHf(state.config))}): not resuming from it`);
    return undefined;
  }
  log.info(`resuming from ${where}; the swarm's state replaces it if the swarm is ahead`);
  return resumeFrom(state, session, where);
}

/** What the collaborative optimizer starts from after a resume: the state's epoch and DiLoCo's outer momentum. */
type Resumed = Pick<TrainingState, 'epoch' | 'outerMomentum'>;

/** Puts `state` into the session (parameters, optimizer and loss scaler when it has them); returns its epoch and outer momentum. */
function resumeFrom(state: TrainingState, session: TrainingSession, where: string): Resumed {
  if (!sameModel(state, session)) {
    throw new TrainingStateError(`${where} holds a model (${JSON.stringify(configToHf(state.config))}) other than the run's (${JSON.stringify(configToHf(session.config))})`);
  }
  session.params.data.set(state.params.data);
  if (state.optimizer) session.optimizer.importState(state.optimizer);
  if (session.scaler && state.optimizer?.lossScaler) session.scaler.importState(state.optimizer.lossScaler);
  return { epoch: state.epoch, ...(state.outerMomentum ? { outerMomentum: state.outerMomentum } : {}) };
}

function sameModel(state: TrainingState, session: TrainingSession): boolean {
  return isDeepStrictEqual(configToHf(state.config), configToHf(session.config));
}

/** --simulated-compute's micro-batch: `seconds` of waiting, then small random gradients (the sign of each value random, as real gradients of a fresh model). */
async function simulatedGradients(grads: ParameterSet, seconds: number, loss: number): Promise<{ loss: number; skipped: false }> {
  await sleep(seconds * 1000);
  const g = grads.data;
  for (let i = 0; i < g.length; i++) g[i] = (Math.random() - 0.5) * 1e-3;
  return { loss, skipped: false };
}
