/**
 * The worker thread behind FullStateSaver (full-state.ts): encodes a snapshot as a training state and
 * writes it with its own connection to the store's database, chunk by chunk, so neither the encoding
 * nor the writing holds the main thread's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import type { AlbertConfig, OptimizerState } from '../engine/index.js';
import { ParameterSet, type ParamView } from '../engine/params.js';
import { CheckpointStore } from '../store/checkpoints.js';
import type { CheckpointInfo } from '../store/index.js';
import { encodeTrainingStatePieces } from './state.js';

interface Common {
  readonly kind: string;
  readonly epoch: number;
  readonly keep: number;
  readonly meta: Record<string, unknown>;
  /** Test fault: stop this long after the first chunk is committed, having said so (a window to kill the process mid-write). */
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
      readonly optimizer: Omit<OptimizerState, 'expAvg' | 'expAvgSq'>;
    })
  | (Common & { readonly type: 'bytes'; readonly bytes: Uint8Array });

export type StateSaveReply = { readonly id: number } & ({ readonly ok: true; readonly info: CheckpointInfo } | { readonly ok: false; readonly error: string } | { readonly paused: number });

const { file } = workerData as { file: string };
const db = new BetterSqlite3(file);
db.pragma('busy_timeout = 5000');
// as the store's own connection (store/database.ts): in WAL mode a commit is atomic and a crash never
// corrupts the file; a power loss may undo the last commits, never the previous checkpoint, which is
// pruned only in the commit that completes the next one. FULL would fsync every 4 MiB chunk.
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = ON'); // the staging row's chunks go with it (ON DELETE CASCADE)
const checkpoints = new CheckpointStore(db, file);

parentPort!.on('message', (request: StateSaveRequest & { id: number }) => {
  let reply: StateSaveReply;
  try {
    const data = request.type === 'bytes' ? request.bytes : encode(request);
    const pause = (written: number): void => {
      if (written !== 1 || request.pauseMs === undefined) return;
      parentPort!.postMessage({ id: request.id, paused: written } satisfies StateSaveReply);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, request.pauseMs); // nothing wakes it: a bounded sleep of this thread
    };
    reply = { id: request.id, ok: true, info: checkpoints.saveChunked({ kind: request.kind, epoch: request.epoch, meta: request.meta, data, keep: request.keep, onChunk: pause }) };
  } catch (err) {
    reply = { id: request.id, ok: false, error: (err as Error).message };
  }
  parentPort!.postMessage(reply);
});

/** The training state's encoding as pieces over the shared buffers: nothing large is copied before the chunks are cut. */
function encode(r: Extract<StateSaveRequest, { type: 'state' }>): Uint8Array[] {
  const wrap = (data: Float32Array): ParameterSet => ParameterSet.wrap(r.specs, data);
  return encodeTrainingStatePieces({ epoch: r.epoch, config: r.config, params: wrap(r.params), optimizer: { ...r.optimizer, expAvg: wrap(r.expAvg), expAvgSq: wrap(r.expAvgSq) } });
}
