/**
 * The worker thread behind WorkerBackend: one OrtBackend whose synchronous onnxruntime runs block
 * this thread instead of the process's event loop. Serves `run` requests on buffers transferred
 * from the JS thread and sends them back with the results; forwards OrtBackend's log lines.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Logger } from '../log/logger.js';
import { OrtBackend } from './ort-backend.js';
import type { FromWorker, LogLine, OrtWorkerData, RunRequest, ToWorker } from './ort-worker-protocol.js';
import { ParameterSet } from './params.js';

const port = parentPort;
if (!port) throw new Error('ort-worker.ts runs as a worker thread of WorkerBackend, not as a script');
const { config, options } = workerData as OrtWorkerData;

const post = (message: FromWorker, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);

function forward(level: LogLine['level']) {
  return (obj: unknown, msg?: string): void => {
    try {
      post({ type: 'log', level, obj, msg });
    } catch {
      post({ type: 'log', level, obj: { detail: String(obj) }, msg }); // a field that cannot be cloned
    }
  };
}
const log: Pick<Logger, 'info' | 'warn'> = { info: forward('info'), warn: forward('warn') };
const backend = new OrtBackend(config, { ...options, log });

async function run(req: RunRequest): Promise<void> {
  const transfer = [req.params.buffer as ArrayBuffer, req.grads.buffer as ArrayBuffer];
  try {
    const params = ParameterSet.wrap(req.specs, req.params);
    const r = await backend.forwardBackward(params, req.batch, ParameterSet.wrap(req.specs, req.grads), { lossScale: req.lossScale });
    const { loss, mlmLoss, sopLoss, mlmAccuracy, sopAccuracy, gradsFinite } = r;
    post({ type: 'result', id: req.id, params: req.params, grads: req.grads, loss, mlmLoss, sopLoss, mlmAccuracy, sopAccuracy, gradsFinite, description: backend.description }, transfer);
  } catch (err) {
    post({ type: 'failed', id: req.id, params: req.params, grads: req.grads, message: (err as Error).message ?? String(err) }, transfer);
  }
}

port.on('message', (message: ToWorker) => {
  if (message.type === 'run') void run(message);
  else void backend.close().finally(() => process.exit(0));
});
