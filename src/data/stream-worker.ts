// Worker thread: builds batches ahead of the training loop and posts them with their buffers transferred.
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from '../store/database.js';
import { DataError } from './errors.js';
import { BatchProducer, type ProducerInit } from './batch-producer.js';
import { DatasetStore } from './dataset-store.js';

export interface WorkerInit extends ProducerInit {
  readonly dbFile: string;
}

export type ToWorker = { readonly type: 'credit'; readonly n: number } | { readonly type: 'stop' };

const init = workerData as WorkerInit;
const port = parentPort!;
// the training thread has it open: see OpenDatabaseOptions.alreadyOpen
const db = openDatabase(path.dirname(init.dbFile), { alreadyOpen: true });
let credit = 0;
let producer: BatchProducer | undefined;
try {
  producer = new BatchProducer(new DatasetStore(db), init);
} catch (err) {
  port.postMessage(errorMessage(err));
}

/** A failure as the stream rebuilds it: a DataError (a fault of the data, said in one line) stays one. */
function errorMessage(err: unknown): { type: 'error'; message: string; data: boolean } {
  return { type: 'error', message: (err as Error).message, data: err instanceof DataError };
}

function produce(): void {
  if (!producer) return;
  while (credit > 0) {
    credit--;
    try {
      const p = producer.next();
      const b = p.batch;
      port.postMessage({ type: 'batch', produced: p }, [b.inputIds.buffer, b.tokenTypeIds.buffer, b.attentionMask.buffer, b.labels.buffer, b.sentenceOrderLabel.buffer] as ArrayBuffer[]);
    } catch (err) {
      port.postMessage(errorMessage(err));
      producer = undefined;
      return;
    }
  }
}

port.on('message', (msg: ToWorker) => {
  if (msg.type === 'stop') {
    db.close();
    port.close();
    return;
  }
  credit += msg.n;
  // Yield between bursts so a 'stop' is seen promptly.
  setImmediate(produce);
});
