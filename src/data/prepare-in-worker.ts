import { siblingEntry, startWorker } from '../util/worker-thread.js';
import { DataError, DownloadError, TokenizerFileError } from './errors.js';
import type { PrepareOptions, PreparedDataset } from './prepare.js';
import type { FromPrepareWorker, PrepareWorkerInit, SerializedError } from './prepare-worker.js';

/**
 * prepareDataset in a worker thread: the same options and result, but training the tokenizer and
 * tokenizing (seconds to minutes of CPU) do not stall this thread's event loop, which in a node also
 * serves the swarm, the dashboard and IPC. The worker opens its own connection to `options.store`'s
 * file; progress and warnings come back to the callbacks here. The worker has ended when the promise
 * settles. A callback that throws stops the preparation at its next progress step, as it would in
 * this thread (its partial shards are removed), and the promise rejects with that error.
 */
export async function prepareDatasetInWorker(options: PrepareOptions): Promise<PreparedDataset> {
  const { store, onProgress, onWarning, ...forwarded } = options;
  const abort = new Int32Array(new SharedArrayBuffer(4));
  const init: PrepareWorkerInit = { dbFile: store.file, options: forwarded, progress: onProgress !== undefined, warnings: onWarning !== undefined, abort };
  const worker = startWorker(siblingEntry(import.meta.url, 'prepare-worker'), { workerData: init });
  let callbackError: { error: unknown } | undefined;
  const call = (callback: () => void) => {
    if (callbackError) return;
    try {
      callback();
    } catch (error) {
      callbackError = { error };
      Atomics.store(abort, 0, 1);
    }
  };
  try {
    const result = await new Promise<PreparedDataset>((resolve, reject) => {
      worker.on('message', (m: FromPrepareWorker) => {
        if (m.type === 'progress') call(() => onProgress?.(m.event));
        else if (m.type === 'warning') call(() => onWarning?.(m.message));
        else if (m.type === 'done') resolve(m.result);
        else reject(revive(m.error));
      });
      worker.on('error', (e) => reject(new Error(`dataset preparation worker failed: ${e.message}`, { cause: e })));
      worker.on('exit', (code) => reject(new Error(`dataset preparation worker exited (code ${code}) before it finished`)));
    });
    // the worker finished before it saw the abort
    if (callbackError) throw callbackError.error;
    return result;
  } catch (err) {
    throw callbackError ? callbackError.error : err;
  } finally {
    worker.removeAllListeners();
    await worker.terminate();
  }
}

const ERROR_CLASSES: Record<string, new (message: string) => Error> = { DataError, TokenizerFileError, DownloadError, RangeError, TypeError };

/** The worker's error as an error of the same class (the CLI maps DataError to its exit code), with the worker's stack. */
function revive(e: SerializedError): Error {
  const Class = ERROR_CLASSES[e.name];
  const err = Class ? new Class(e.message) : Object.assign(new Error(e.message), { name: e.name });
  if (e.stack !== undefined) err.stack = e.stack;
  if (e.code !== undefined) Object.assign(err, { code: e.code });
  return err;
}
