import assert from 'node:assert/strict';
import test from 'node:test';
import { probeProvider } from '../../src/doctor/ort-probe.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import type { TrainingBackend } from '../../src/engine/backend.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { WorkerBackend } from '../../src/engine/worker-backend.js';
import { PADDED_TINY_BATCH } from '../helpers/albert-batch.js';

const config = PRESETS.tiny;
const options = { provider: 'cpu', intraOpThreads: 1 } as const;

test('the worker gives bit-identical loss, metrics and gradients to OrtBackend (fp32 and fp16 at a loss scale), into the given grads', async (t) => {
  const params = initAlbertParams({ ...config, initializerRange: 0.1 }, 4);
  for (const [precision, lossScale] of [['fp32', 1], ['fp16', 1024]] as const) {
    const inline = new OrtBackend(config, { ...options, precision });
    const worker = new WorkerBackend(config, { ...options, precision });
    t.after(() => Promise.all([inline.close(), worker.close()]));
    const expected = await inline.forwardBackward(params, PADDED_TINY_BATCH, undefined, { lossScale });
    const grads = params.zerosLike();
    const got = await worker.forwardBackward(params, PADDED_TINY_BATCH, grads, { lossScale });
    assert.equal(got.grads, grads, 'the gradients land in the caller\'s grads');
    for (const key of ['loss', 'mlmLoss', 'sopLoss', 'mlmAccuracy', 'sopAccuracy', 'gradsFinite'] as const) assert.equal(got[key], expected[key], `${precision} ${key}`);
    assert.ok(expected.grads.data.some((v) => v !== 0));
    assert.deepEqual(got.grads.data, expected.grads.data, `${precision} gradients`);
    assert.equal(worker.precision, precision);
    assert.match(worker.description, precision === 'fp16' ? /cpu, 1 threads, fp16 \(worker thread\)/ : /cpu, 1 threads \(worker thread\)/);
  }
});

test('the parameters are read when the call is made: changing them while the pass is in flight does not change its result', async (t) => {
  const params = initAlbertParams(config, 6);
  const backend = new WorkerBackend(config, options);
  t.after(() => backend.close());
  const before = await backend.forwardBackward(params, PADDED_TINY_BATCH);
  const loss = before.loss;
  const running = backend.forwardBackward(params, PADDED_TINY_BATCH, params.zerosLike());
  params.data.fill(0.5);
  assert.equal((await running).loss, loss);
  assert.notEqual((await backend.forwardBackward(params, PADDED_TINY_BATCH)).loss, loss);
});

test('a bad batch rejects with OrtBackend\'s message, and the worker keeps serving', async (t) => {
  const params = initAlbertParams(config, 1);
  const bad = { ...PADDED_TINY_BATCH, inputIds: PADDED_TINY_BATCH.inputIds.map((v, i) => (i === 3 ? config.vocabSize + 5 : v)) };
  const inline = new OrtBackend(config, options);
  const worker = new WorkerBackend(config, options);
  t.after(() => Promise.all([inline.close(), worker.close()]));
  const message = await inline.forwardBackward(params, bad).then(() => assert.fail('OrtBackend accepted the bad batch'), (err: Error) => err.message);
  assert.match(message, /input_ids\[0\]\[3\]/);
  await assert.rejects(worker.forwardBackward(params, bad), (err: Error) => err.message === message);
  await assert.rejects(worker.forwardBackward(params, PADDED_TINY_BATCH, undefined, { lossScale: 8 }), /loss scale 8 needs precision fp16/);
  assert.ok(Number.isFinite((await worker.forwardBackward(params, PADDED_TINY_BATCH)).loss));
  const other = initAlbertParams({ ...config, numHiddenLayers: 3, embeddingSize: 16 }, 1);
  await assert.rejects(worker.forwardBackward(params, PADDED_TINY_BATCH, other.zerosLike()), /grads do not have the parameters' layout/);
});

test('a worker that dies rejects the pending call and every later one with the exit code; a worker that cannot load rejects too', async () => {
  const params = initAlbertParams(config, 1);
  const dying = new WorkerBackend(config, { ...options, workerEntry: new URL('../fixtures/exiting-ort-worker.ts', import.meta.url) });
  await assert.rejects(dying.forwardBackward(params, PADDED_TINY_BATCH), /onnxruntime worker exited \(code 3\)/);
  await assert.rejects(dying.forwardBackward(params, PADDED_TINY_BATCH), /onnxruntime worker exited \(code 3\)/);
  await dying.close();
  const missing = new WorkerBackend(config, { ...options, workerEntry: new URL('../fixtures/no-such-worker.ts', import.meta.url) });
  await assert.rejects(missing.forwardBackward(params, PADDED_TINY_BATCH), /onnxruntime worker failed: .*no-such-worker/);
  await missing.close();
});

test('close() rejects a call in flight and later calls, and ends the worker', async () => {
  const params = initAlbertParams(config, 1);
  const backend = new WorkerBackend(config, options);
  const running = backend.forwardBackward(params, PADDED_TINY_BATCH);
  const rejected = assert.rejects(running, /the backend is closed/);
  await backend.close();
  await rejected;
  await assert.rejects(backend.forwardBackward(params, PADDED_TINY_BATCH), /the backend is closed/);
});

test('OrtBackend\'s log lines (provider choice, CUDA fallback reason) reach the logger', async (t) => {
  const params = initAlbertParams(config, 1);
  const lines: Array<{ level: string; obj: unknown; msg: string | undefined }> = [];
  const log = { info: (obj: unknown, msg?: string) => void lines.push({ level: 'info', obj, msg }), warn: (obj: unknown, msg?: string) => void lines.push({ level: 'warn', obj, msg }) };
  const cpu = new WorkerBackend(config, { ...options, log });
  t.after(() => cpu.close());
  await cpu.forwardBackward(params, PADDED_TINY_BATCH);
  assert.deepEqual(lines, [{ level: 'info', obj: { intraOpThreads: 1 }, msg: 'onnxruntime session on CPU' }]);
  if ((await probeProvider('cuda')).ok) return t.skip('CUDA loads on this machine: no fallback to log');
  lines.length = 0;
  const auto = new WorkerBackend(config, { provider: 'auto', intraOpThreads: 1, log });
  t.after(() => auto.close());
  await auto.forwardBackward(params, PADDED_TINY_BATCH);
  assert.equal(lines[0]?.level, 'warn');
  assert.match(JSON.stringify(lines[0]), /reason.*CUDA execution provider unavailable/);
  assert.match(auto.description, /onnxruntime cpu/);
});

/** setImmediate turns the event loop takes while one pass runs. */
async function loopTurnsDuring(backend: TrainingBackend, params: ReturnType<typeof initAlbertParams>, batch: ReturnType<typeof syntheticBatch>): Promise<number> {
  let turns = 0;
  let done = false;
  const spin = (): void => {
    if (done) return;
    turns++;
    setImmediate(spin);
  };
  const running = backend.forwardBackward(params, batch);
  setImmediate(spin);
  await running;
  done = true;
  return turns;
}

test('the event loop keeps turning while the worker computes (inline, onnxruntime holds it for the whole run)', async (t) => {
  const params = initAlbertParams(config, 1);
  const batch = syntheticBatch(config, 48, 128, new Rng(3));
  const inline = new OrtBackend(config, options);
  const worker = new WorkerBackend(config, options);
  t.after(() => Promise.all([inline.close(), worker.close()]));
  await inline.forwardBackward(params, batch); // builds the sessions: only the runs are compared
  await worker.forwardBackward(params, batch);
  const inlineTurns = await loopTurnsDuring(inline, params, batch);
  const started = performance.now();
  const workerTurns = await loopTurnsDuring(worker, params, batch);
  t.diagnostic(`event loop turns during one ${batch.batchSize}×${batch.seqLen} pass: inline ${inlineTurns}, worker ${workerTurns} (${(performance.now() - started).toFixed(0)} ms)`);
  // a pass of this size lasts hundreds of milliseconds, a turn of an idle loop microseconds; inline the count is the few turns around the run
  assert.ok(workerTurns > 10 * Math.max(inlineTurns, 5), `only ${workerTurns} turns during the worker's pass (inline: ${inlineTurns})`);
});
