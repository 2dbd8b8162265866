// Worker thread: runs prepareDataset (tokenizer training, tokenizing, shard writes) off the event
// loop of the process that trains, on its own connection to the store (see prepare-in-worker.ts).
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { openStore } from '../store/index.js';
import { prepareDataset, type PrepareEvent, type PrepareOptions, type PreparedDataset } from './prepare.js';

export interface PrepareWorkerInit {
  readonly dbFile: string;
  readonly options: Omit<PrepareOptions, 'store' | 'onProgress' | 'onWarning'>;
  /** Post progress events / warnings only when the caller listens. */
  readonly progress: boolean;
  readonly warnings: boolean;
  /** Set to 1 by the parent when its callback failed: the next callback here throws, so prepareDataset cleans up. */
  readonly abort: Int32Array;
}

export interface SerializedError {
  readonly name: string;
  readonly message: string;
  readonly stack?: string;
  readonly code?: string;
}

export type FromPrepareWorker =
  | { readonly type: 'progress'; readonly event: PrepareEvent }
  | { readonly type: 'warning'; readonly message: string }
  | { readonly type: 'done'; readonly result: PreparedDataset }
  | { readonly type: 'error'; readonly error: SerializedError };

const init = workerData as PrepareWorkerInit;
const port = parentPort!;
const post = (m: FromPrepareWorker) => port.postMessage(m);
const checkAbort = () => {
  if (Atomics.load(init.abort, 0) !== 0) throw new Error('dataset preparation aborted: a callback of the caller failed');
};

async function run(): Promise<FromPrepareWorker> {
  // the caller's thread has it open: see OpenDatabaseOptions.alreadyOpen
  const store = openStore(path.dirname(init.dbFile), { alreadyOpen: true });
  try {
    const result = await prepareDataset({
      ...init.options,
      store,
      onProgress: (event) => {
        checkAbort();
        if (init.progress) post({ type: 'progress', event });
      },
      onWarning: (message) => {
        checkAbort();
        if (init.warnings) post({ type: 'warning', message });
      },
    });
    return { type: 'done', result };
  } finally {
    // closed before the outcome is posted: the parent terminates the worker once it has it
    store.close();
  }
}

function failure(err: unknown): FromPrepareWorker {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as NodeJS.ErrnoException).code;
  return { type: 'error', error: { name: e.name, message: e.message, stack: e.stack, ...(typeof code === 'string' ? { code } : {}) } };
}

void run().catch(failure).then(post);
