/**
 * Full-state checkpoints: everything a run needs to continue after every peer left — parameters,
 * LAMB moments and step, the swarm epoch, the loss scaler's state (fp16) — stored in the SQLite store
 * as the training state peers send each other (state.ts), with the run id and the signed run record
 * in the checkpoint's meta. A training peer keeps its own (kind `state`), the coordinator the swarm's
 * (kind `swarm-state`), and a restarted coordinator serves its bytes as they are to the first
 * joiners. See docs/collab.md ("Checkpoints and resume").
 *
 * Saving never blocks the event loop for long (averaging and state serving go on): the parameters
 * and moments are copied a few tensors at a time into buffers shared with a worker thread, which
 * encodes them and writes them with its own connection to the store's checkpoint file, a few chunks per
 * commit (CheckpointStore's saveChunked: a kill mid-write leaves the previous checkpoint).
 */
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { decodeOptimizerState, encodeOptimizerState, loadModel, saveModel, type DynamicLossScaler, type Optimizer } from '../engine/index.js';
import { describeConfig } from '../engine/optim/config.js';
import { ParameterSet } from '../engine/params.js';
import type { Logger } from '../log/logger.js';
import { checkpointName, type CheckpointInfo, type Store } from '../store/index.js';
import { ownBuffer, RequestWorker, siblingEntry } from '../util/worker-thread.js';
import { TrainingStateError } from './errors.js';
import type { StateSaveNotice, StateSaveReply, StateSaveRequest } from './full-state-worker.js';
import { runParamsSchema, type RunParams } from './run-params.js';
import { decodeTrainingState, type TrainingState } from './state.js';

/** Store checkpoint kinds: a training peer's own state, and the swarm's as the coordinator keeps it. */
export const PEER_STATE_CHECKPOINT = 'state';
export const SWARM_STATE_CHECKPOINT = 'swarm-state';
export type FullStateKind = typeof PEER_STATE_CHECKPOINT | typeof SWARM_STATE_CHECKPOINT;

/** Elements copied between two yields to the event loop while snapshotting (4 MiB of float32; a larger tensor is copied alone). */
const SNAPSHOT_SLICE_ELEMENTS = 1024 * 1024;

/**
 * The checkpoint worker ends when no save came for this long, and the next save starts another: between
 * saves (5 minutes apart by default) a peer does not keep the worker's isolate and SQLite connection
 * resident (40–50 MB, growing by 20 MB over its first hundred saves as its heap settles).
 */
const SAVE_WORKER_IDLE_MS = 30_000;

/** How long the test fault pauses a save mid-write: ample time for a test to kill the process. */
const PAUSED_SAVE_MS = 60_000;

/** What a full-state checkpoint's meta holds besides what the caller adds (e.g. the donor). */
const metaSchema = z.looseObject({
  runId: z.string().min(1),
  /** The signed run record's value when the saver knew it. */
  run: runParamsSchema.optional(),
});
export type FullStateMeta = z.input<typeof metaSchema>;

export interface FullStateCheckpoint {
  readonly info: CheckpointInfo;
  /** Epoch, model config, parameters and optimizer state (with the loss scaler's, when saved by an fp16 peer). */
  readonly state: TrainingState;
  readonly runId: string;
  readonly run: RunParams | undefined;
  /** The stored bytes: the training state's wire encoding, servable as is. */
  readonly bytes: Uint8Array;
}

/**
 * The newest full-state checkpoint of `kind` (of run `runId` when given) that verifies and decodes:
 * what resume and exporters read. Damaged ones are skipped and reported through `onSkip`, and so,
 * when `run` is given, are those whose run record differs from it (a run founded again under the
 * same id): an older checkpoint of this very run then loads.
 */
export function loadFullState(store: Store, kind: FullStateKind, opts: { runId?: string; run?: RunParams; onSkip?: (message: string) => void } = {}): FullStateCheckpoint | undefined {
  const { checkpoints } = store;
  function* ofRun(): Generator<CheckpointInfo> {
    for (const info of checkpoints.list(kind)) {
      const meta = metaSchema.safeParse(info.meta);
      if (!meta.success) opts.onSkip?.(`${checkpointName(info)} has no valid run id or run record: ${z.prettifyError(meta.error)}`);
      else if (opts.runId !== undefined && meta.data.runId !== opts.runId) continue;
      else if (opts.run && meta.data.run && !isDeepStrictEqual(meta.data.run, opts.run)) {
        opts.onSkip?.(`${checkpointName(info)} belongs to another run "${meta.data.runId}" (founded ${new Date(meta.data.run.created).toISOString()}, this one ${new Date(opts.run.created).toISOString()}): not resuming from it`);
      } else yield info;
    }
  }
  const found = checkpoints.loadNewestReadable(ofRun(), (data, info) => {
    const state = decodeTrainingState(data, `checkpoint ${info.id} in ${checkpoints.file}`);
    if (!state.optimizer) throw new TrainingStateError(`checkpoint ${info.id} in ${checkpoints.file} holds no optimizer state`);
    return state;
  }, (message) => opts.onSkip?.(message));
  if (!found) return undefined;
  // ofRun yielded it: its meta is valid
  const { runId, run } = metaSchema.parse(found.info.meta);
  return { info: found.info, state: found.decoded, runId, run, bytes: found.data };
}

/**
 * What a node resumes its run from (a volunteer its own state, a coordinator the swarm's): the newest
 * `kind` checkpoint of run `runId` whose record is `run` (when the node knows it: a run founded again
 * under the same id with another recipe is passed over), skips warned about on `log`.
 */
export function loadRunState(store: Store, kind: FullStateKind, runId: string, run: RunParams | undefined, log: Logger): FullStateCheckpoint | undefined {
  return loadFullState(store, kind, { runId, ...(run ? { run } : {}), onSkip: (m) => log.warn(m) });
}

/**
 * The newest full-state checkpoint of run `runId` this data directory holds, of either kind: its
 * training peer's own or its coordinator's (the app's switch and Start share one directory and
 * checkpoint the same run). Those of another record than `run` (when known) are passed over, and
 * skips warned about on `log`.
 */
export function loadNewestRunState(store: Store, runId: string, run: RunParams | undefined, log: Logger): FullStateCheckpoint | undefined {
  return newerRunState(loadRunState(store, PEER_STATE_CHECKPOINT, runId, run, log), loadRunState(store, SWARM_STATE_CHECKPOINT, runId, run, log));
}

/** The newer of a training peer's and a coordinator's checkpoint of one run (the peer's at the same epoch). */
export function newerRunState(peers: FullStateCheckpoint | undefined, coordinators: FullStateCheckpoint | undefined): FullStateCheckpoint | undefined {
  return coordinators && coordinators.state.epoch > (peers?.state.epoch ?? -1) ? coordinators : peers;
}

/** The settings key under which a data directory keeps the record of run `runId` it founded or joined. */
function runRecordSetting(runId: string): string {
  return `run.record.${runId}`;
}

/**
 * The record of run `runId` this data directory keeps: the newest (by `created`) of the one kept when
 * the run was founded or joined (`keptRunRecord`) and those its full-state checkpoints carry (either kind).
 */
export function storedRunRecord(store: Store, runId: string): RunParams | undefined {
  const fromCheckpoints = [...store.checkpoints.list(PEER_STATE_CHECKPOINT), ...store.checkpoints.list(SWARM_STATE_CHECKPOINT)]
    .map((info) => metaSchema.safeParse(info.meta).data)
    .flatMap((m) => (m?.runId === runId && m.run !== undefined ? [m.run] : []));
  let kept: RunParams | undefined;
  try {
    kept = store.settings.get(runRecordSetting(runId), runParamsSchema);
  } catch {
    kept = undefined; // written by a version with another record schema: the checkpoints' (or a new one) serve
  }
  return [...fromCheckpoints, ...(kept ? [kept] : [])].sort((a, b) => b.created - a.created)[0];
}

/**
 * For resolveRunParams: the record of run `runId` this data directory keeps, and where the resolved
 * one is kept at once. A founder restarted before its first checkpoint then re-publishes its run
 * instead of founding another under the same id (which would orphan every peer's checkpoints).
 */
export function keptRunRecord(store: Store, runId: string): { readonly stored: RunParams | undefined; readonly keep: (record: RunParams) => void } {
  return { stored: storedRunRecord(store, runId), keep: (record) => store.settings.set(runRecordSetting(runId), record, runParamsSchema) };
}

/** Files of a state directory besides the model's config.json and model.safetensors (docs/collab.md). */
const OPTIMIZER_STATE_FILE = 'optimizer.safetensors';
export const STATE_INFO_FILE = 'cohort-state.json';

const stateInfoSchema = z.strictObject({
  /** The swarm epoch the parameters are at. */
  epoch: z.number().int().min(0),
});

/**
 * Writes a full state as a directory: the model as Hugging Face loads it (config.json +
 * model.safetensors), the optimizer state (optimizer.safetensors: LAMB moments, step, loss scaler)
 * and cohort-state.json ({ epoch }). What `cohort run --resume-from` reads.
 */
export function saveStateDir(dir: string, state: TrainingState): void {
  saveModel(dir, state.config, state.params);
  if (state.optimizer) fs.writeFileSync(path.join(dir, OPTIMIZER_STATE_FILE), encodeOptimizerState(state.optimizer));
  fs.writeFileSync(path.join(dir, STATE_INFO_FILE), JSON.stringify({ epoch: state.epoch }, null, 2) + '\n');
}

/**
 * Reads a state directory (saveStateDir's, or a bare model directory: then the optimizer starts
 * fresh at epoch 0). Errors name the file at fault.
 */
export function loadStateDir(dir: string): TrainingState {
  const { config, params } = loadModel(dir);
  const optimizerFile = path.join(dir, OPTIMIZER_STATE_FILE);
  let optimizer: TrainingState['optimizer'];
  if (fs.existsSync(optimizerFile)) {
    try {
      optimizer = decodeOptimizerState(fs.readFileSync(optimizerFile), params);
    } catch (err) {
      throw new TrainingStateError(`${optimizerFile}: ${(err as Error).message}`, { cause: err });
    }
  }
  const infoFile = path.join(dir, STATE_INFO_FILE);
  let info: z.infer<typeof stateInfoSchema> = { epoch: 0 };
  if (fs.existsSync(infoFile)) {
    let json: unknown;
    try {
      json = JSON.parse(fs.readFileSync(infoFile, 'utf8'));
    } catch (err) {
      throw new TrainingStateError(`${infoFile}: not valid JSON: ${(err as Error).message}`, { cause: err });
    }
    const parsed = stateInfoSchema.safeParse(json);
    if (!parsed.success) throw new TrainingStateError(`${infoFile}: ${z.prettifyError(parsed.error)}`);
    info = parsed.data;
  }
  return { epoch: info.epoch, config, params, ...(optimizer ? { optimizer } : {}) };
}

/** What a training peer saves: its parameters with their epoch, its optimizer and loss scaler (and DiLoCo's outer momentum). */
export interface LiveState {
  readonly epoch: number;
  readonly config: TrainingState['config'];
  /** In a DiLoCo run θ_start of the peer's round. */
  readonly params: ParameterSet;
  readonly outerMomentum?: ParameterSet | undefined;
  readonly optimizer: Optimizer;
  readonly scaler?: DynamicLossScaler | undefined;
}

interface Shared {
  readonly params: Float32Array;
  readonly expAvg: ParameterSet;
  readonly expAvgSq: ParameterSet;
  /** Allocated by the first save that has an outer momentum. */
  outerMomentum?: Float32Array;
}

/**
 * Writes full-state checkpoints off the event loop, one at a time, through a worker thread (started
 * on first use, ended when idle) with its own connection to the store's checkpoint file.
 */
export class FullStateSaver {
  private worker: RequestWorker<StateSaveRequest, StateSaveReply, StateSaveNotice> | undefined;
  private shared: Shared | undefined;
  private busy = false;

  /** Saves (`save`) requested so far: the fault pauses the one numbered `pauseSave`. */
  private saves = 0;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly opts: {
      /** Test fault (`--fault-pause-state-save N`): the N-th `save` stops for PAUSED_SAVE_MS after its first chunks are committed. */
      readonly pauseSave?: number | undefined;
      /** @default SAVE_WORKER_IDLE_MS */
      readonly workerIdleMs?: number;
    } = {},
  ) {}

  /**
   * Snapshots `live` and writes it as a checkpoint of `kind`, keeping the newest `keep`. Resolves
   * `snapshotted` once the values are copied (nothing may change `live` before: the caller awaits it
   * before its next step), then `written` with the checkpoint. Undefined while a save is running.
   */
  save(kind: FullStateKind, live: LiveState, meta: FullStateMeta, keep: number): { snapshotted: Promise<void>; written: Promise<CheckpointInfo> } | undefined {
    if (this.busy) return undefined;
    this.busy = true;
    const pause = ++this.saves === this.opts.pauseSave ? { pauseMs: PAUSED_SAVE_MS } : {};
    const snapshotted = this.snapshot(live);
    const written = snapshotted.then(() => {
      const shared = this.shared!;
      const o = live.optimizer;
      return this.write({
        type: 'state',
        kind,
        epoch: live.epoch,
        keep,
        meta,
        config: live.config,
        specs: live.params.specs,
        params: shared.params,
        expAvg: shared.expAvg.data,
        expAvgSq: shared.expAvgSq.data,
        ...(live.outerMomentum ? { outerMomentum: shared.outerMomentum! } : {}),
        optimizer: { kind: o.config.kind, step: o.stepCount, config: describeConfig(o.config), ...(live.scaler ? { lossScaler: live.scaler.exportState() } : {}) },
        ...pause,
      });
    });
    return { snapshotted, written: this.finish(written) };
  }

  /**
   * Writes an already encoded training state (a coordinator's download) as a checkpoint of `kind`.
   * Bytes that fill their whole buffer are handed to the worker (detached here, not copied). Undefined
   * while a save is running.
   */
  saveBytes(kind: FullStateKind, epoch: number, bytes: Uint8Array, meta: FullStateMeta, keep: number): Promise<CheckpointInfo> | undefined {
    if (this.busy) return undefined;
    this.busy = true;
    return this.finish(this.write({ type: 'bytes', kind, epoch, keep, meta, bytes }));
  }

  /** Ends the worker (after the save being written, if any). */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.close();
  }

  private finish(written: Promise<CheckpointInfo>): Promise<CheckpointInfo> {
    return written.finally(() => (this.busy = false));
  }

  /** Copies the parameters, moments and outer momentum into the shared buffers, a slice of tensors per event-loop turn. */
  private async snapshot(live: LiveState): Promise<void> {
    const n = live.params.size;
    if (this.shared?.params.length !== n) {
      // allocated once per saver and reused; their pages are faulted in by the worker, not by the copies
      // below (214 MiB of first touches took seconds of the event loop on the large preset)
      const wrap = (): ParameterSet => ParameterSet.wrap(live.params.specs, new Float32Array(new SharedArrayBuffer(n * 4)));
      const shared = { params: wrap().data, expAvg: wrap(), expAvgSq: wrap() };
      await this.request({ type: 'prefault', buffers: [shared.params, shared.expAvg.data, shared.expAvgSq.data].map((a) => a.buffer as SharedArrayBuffer) });
      this.shared = shared;
    }
    const shared = this.shared;
    if (live.outerMomentum && !shared.outerMomentum) {
      shared.outerMomentum = new Float32Array(new SharedArrayBuffer(n * 4));
      await this.request({ type: 'prefault', buffers: [shared.outerMomentum.buffer as SharedArrayBuffer] });
    }
    const specs = live.params.specs;
    for (let first = 0; first < specs.length; ) {
      let end = first;
      let elements = 0;
      while (end < specs.length && (end === first || elements + specs[end]!.size <= SNAPSHOT_SLICE_ELEMENTS)) elements += specs[end++]!.size;
      const from = specs[first]!.offset;
      const to = specs[end - 1]!.offset + specs[end - 1]!.size;
      shared.params.set(live.params.data.subarray(from, to), from);
      if (live.outerMomentum) shared.outerMomentum!.set(live.outerMomentum.data.subarray(from, to), from);
      live.optimizer.copyMoments(shared, first, end);
      first = end;
      if (first < specs.length) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** A save request: the worker answers with the checkpoint written. */
  private async write(message: Exclude<StateSaveRequest, { type: 'prefault' }>): Promise<CheckpointInfo> {
    const info = await this.request(message);
    if (!info) throw new Error(`the checkpoint worker answered a save in ${this.store.checkpoints.file} without the checkpoint`);
    return info;
  }

  private async request(message: StateSaveRequest): Promise<CheckpointInfo | undefined> {
    const file = this.store.checkpoints.file;
    if (this.worker === undefined || this.worker.ended) {
      const onNotice = ({ paused }: StateSaveNotice): void => this.log.warn(`testing (--fault-pause-state-save): a full-state save paused mid-write after ${paused} chunk committed, for ${PAUSED_SAVE_MS / 1000} s`);
      this.worker = new RequestWorker(siblingEntry(import.meta.url, 'full-state-worker'), { name: 'checkpoint worker', workerData: { file }, idleMs: this.opts.workerIdleMs ?? SAVE_WORKER_IDLE_MS, onNotice });
    }
    try {
      return (await this.worker.request(message, message.type === 'bytes' ? ownBuffer(message.bytes) : [])).info;
    } catch (err) {
      throw new Error(`saving a full-state checkpoint in ${file} failed: ${(err as Error).message}`, { cause: err });
    }
  }
}
