/**
 * The worker thread behind FullStateSaver (full-state.ts): encodes a snapshot as a training state and
 * writes it with its own connection to the store's checkpoint file, a few chunks per commit, so
 * neither the encoding nor the writing holds the main thread's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { AlbertConfig, OptimizerState } from '../engine/index.js';
import { ParameterSet, type ParamView } from '../engine/params.js';
import { openCheckpointDatabase } from '../store/checkpoint-database.js';
import { CheckpointStore } from '../store/checkpoints.js';
import type { CheckpointInfo } from '../store/index.js';
import { encodeTrainingStatePieces } from './state.js';

interface Common {
  readonly kind: string;
  readonly epoch: number;
  readonly keep: number;
  readonly meta: Record<string, unknown>;
  /** Test fault: stop this long after the first chunks are committed, having said so (a window to kill the process mid-write). */
  readonly pauseMs?: number;
}

export type StateSaveRequest =
  | (Common & {
      readonly type: 'state';
      readonly config: AlbertConfig;
      readonly specs: readonly ParamView[];
      /** Over SharedArrayBuffers the saver copied the values into. */
      readonly params: Float32Array;
      readonly expAvg: Float32Array;
      readonly expAvgSq: Float32Array;
      /** DiLoCo's outer momentum, in the parameters' layout. */
      readonly outerMomentum?: Float32Array;
      readonly optimizer: Omit<OptimizerState, 'expAvg' | 'expAvgSq'>;
    })
  | (Common & { readonly type: 'bytes'; readonly bytes: Uint8Array })
  /** Touches every page of the saver's new shared buffers here, so the first snapshot's copies into them take no page faults on the main thread. */
  | { readonly type: 'prefault'; readonly buffers: readonly SharedArrayBuffer[] };

export type StateSaveReply = { readonly id: number } & ({ readonly info?: CheckpointInfo } | { readonly error: string });
/** The test fault's notice: the save stopped after `paused` chunks were committed. */
export type StateSaveNotice = { readonly paused: number };

/** Linux and macOS page size; a larger page is still touched (several times). */
const PAGE_BYTES = 4096;

const { file } = workerData as { file: string };
// opened as the store opens it (journal, synchronous, foreign keys for the staging row's chunks): a
// commit is atomic and a crash or power loss never undoes the previous checkpoint, which is pruned
// only in the commit that completes the next one
// the node's store has it open already (OpenDatabaseOptions.alreadyOpen)
const checkpoints = new CheckpointStore(openCheckpointDatabase(file, { alreadyOpen: true }), file);

parentPort!.on('message', (request: StateSaveRequest & { id: number }) => {
  let reply: StateSaveReply;
  if (request.type === 'prefault') {
    for (const buffer of request.buffers) {
      const bytes = new Uint8Array(buffer);
      for (let i = 0; i < bytes.length; i += PAGE_BYTES) bytes[i] = 0;
    }
    parentPort!.postMessage({ id: request.id } satisfies StateSaveReply);
    return;
  }
  try {
    const data = request.type === 'bytes' ? request.bytes : encode(request);
    let paused = false;
    const pause = (written: number): void => {
      if (paused || request.pauseMs === undefined) return;
      paused = true;
      parentPort!.postMessage({ paused: written } satisfies StateSaveNotice);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, request.pauseMs); // nothing wakes it: a bounded sleep of this thread
    };
    reply = { id: request.id, info: checkpoints.saveChunked({ kind: request.kind, epoch: request.epoch, meta: request.meta, data, keep: request.keep, onChunk: pause }) };
  } catch (err) {
    reply = { id: request.id, error: (err as Error).message };
  }
  parentPort!.postMessage(reply);
});

/** The training state's encoding as pieces over the shared buffers: nothing large is copied before the chunks are cut. */
function encode(r: Extract<StateSaveRequest, { type: 'state' }>): Uint8Array[] {
  const wrap = (data: Float32Array): ParameterSet => ParameterSet.wrap(r.specs, data);
  return encodeTrainingStatePieces({ epoch: r.epoch, config: r.config, params: wrap(r.params), optimizer: { ...r.optimizer, expAvg: wrap(r.expAvg), expAvgSq: wrap(r.expAvgSq) }, ...(r.outerMomentum ? { outerMomentum: wrap(r.outerMomentum) } : {}) });
}
