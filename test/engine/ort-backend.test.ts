import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { lastRunProfile } from '../../bench/_ort-profile.js';
import { probeProvider } from '../../src/doctor/ort-probe.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import type { AlbertBatch } from '../../src/engine/batch.js';
import { mlmCapacity } from '../../src/engine/albert/mlm-positions.js';
import { missingCudaProvider } from '../../src/engine/cuda-install.js';
import { cudaSessionOptions, OrtBackend } from '../../src/engine/ort-backend.js';
import * as ort from 'onnxruntime-node';
import { identityModelBytes } from '../../src/doctor/ort-probe.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { tmpDir } from '../helpers/tmp.js';

const config = PRESETS.tiny;

/** The batch with every row repeated `times` times. */
function repeatRows(b: AlbertBatch, times: number): AlbertBatch {
  const rep = (a: Int32Array) => Int32Array.from({ length: a.length * times }, (_, i) => a[i % a.length]!);
  return { ...b, batchSize: b.batchSize * times, inputIds: rep(b.inputIds), tokenTypeIds: rep(b.tokenTypeIds), attentionMask: rep(b.attentionMask), labels: rep(b.labels), sentenceOrderLabel: rep(b.sentenceOrderLabel) };
}

test('one session per shape; rows do not see each other (a batch of duplicates gives the same loss and gradients)', async () => {
  const params = initAlbertParams(config, 2);
  const one = syntheticBatch(config, 1, 12, new Rng(9));
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const a = await backend.forwardBackward(params, one);
  const gradsA = a.grads.data.slice();
  const b = await backend.forwardBackward(params, repeatRows(one, 3));
  await backend.close();
  assert.ok(Math.abs(a.loss - b.loss) < 1e-5, `loss ${a.loss} vs ${b.loss}`);
  assert.equal(a.mlmAccuracy, b.mlmAccuracy);
  // the mean over three identical rows has the gradient of one row
  const scale = Math.max(...Array.from(gradsA, Math.abs));
  b.grads.data.forEach((v, i) => assert.ok(Math.abs(v - gradsA[i]!) <= 1e-4 * scale, `grad[${i}] ${v} vs ${gradsA[i]}`));
});

test('without a loadable CUDA provider, "cuda" fails naming it and "auto" falls back to CPU with the reason logged', async (t) => {
  if ((await probeProvider('cuda')).ok) return t.skip('CUDA loads on this machine');
  const params = initAlbertParams(config, 2);
  const batch = syntheticBatch(config, 1, 8, new Rng(1));
  const strict = new OrtBackend(config, { provider: 'cuda' });
  await assert.rejects(strict.forwardBackward(params, batch), /CUDA execution provider failed to load/);
  // where the provider's files were never installed (as here, ONNXRUNTIME_NODE_INSTALL=skip), that is the reason given
  const missing = missingCudaProvider();
  const warnings: unknown[] = [];
  const log = { warn: (obj: unknown) => void warnings.push(obj), info: () => undefined };
  const auto = new OrtBackend(config, { provider: 'auto', intraOpThreads: 1, log });
  const r = await auto.forwardBackward(params, batch);
  await auto.close();
  assert.ok(Number.isFinite(r.loss));
  assert.equal(warnings.length, 1);
  assert.match(JSON.stringify(warnings[0]), /reason/);
  if (missing !== undefined) {
    assert.deepEqual(warnings[0], { reason: missing });
    assert.match(missing, /onnxruntime-node was installed without its CUDA provider \(.*libonnxruntime_providers_cuda\.so.* not in .*napi-v6/);
    await assert.rejects(new OrtBackend(config, { provider: 'cuda' }).forwardBackward(params, batch), { message: `CUDA execution provider failed to load: ${missing}` });
  }
  assert.match(auto.description, /cpu/);
});

test('a CUDA session disables the CPU fallback: onnxruntime then refuses any node left to its default CPU provider', async () => {
  // Here every node is left to the CPU (only the CPU provider is given), which is what a node without a
  // CUDA kernel would be on a GPU: the option must reach onnxruntime in the form its Node binding accepts.
  const options = { ...cudaSessionOptions({ graphOptimizationLevel: 'all' }), executionProviders: ['cpu'], logSeverityLevel: 4 as const };
  await assert.rejects(ort.InferenceSession.create(identityModelBytes(), options), /assigned to the default CPU EP, but fallback to CPU EP has been explicitly disabled/);
  assert.deepEqual(cudaSessionOptions({}).executionProviders, ['cuda']);
});

test('the runner gathers labelled positions for the MLM head: same loss, accuracies and gradients as the full-positions graph', async () => {
  // Tolerance (float32, summation order differs): |Δloss| ≤ 1e-5, every gradient within 1e-4 of its tensor's largest |value|,
  // or within 1e-7 of the largest gradient overall (float32's epsilon) for a tensor that is zero in exact arithmetic (the key bias: softmax ignores
  // a shift shared by a row's scores), which holds float32 rounding noise only.
  const params = initAlbertParams({ ...config, initializerRange: 0.1 }, 3);
  const batch = syntheticBatch(config, 3, 16, new Rng(8));
  const gathered = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const full = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, mlmProbability: 1 }); // K = B·S: the full graph
  const a = await gathered.forwardBackward(params, batch);
  const b = await full.forwardBackward(params, batch);
  await gathered.close();
  await full.close();
  assert.ok(Math.abs(a.loss - b.loss) <= 1e-5 && Math.abs(a.mlmLoss - b.mlmLoss) <= 1e-5, `loss ${a.loss} vs ${b.loss}`);
  assert.equal(a.mlmAccuracy, b.mlmAccuracy);
  assert.equal(a.sopAccuracy, b.sopAccuracy);
  const largest = Math.max(...Array.from(b.grads.data, Math.abs));
  for (const name of params.names()) {
    const ref = b.grads.view(name);
    const tolerance = Math.max(1e-4 * Math.max(...Array.from(ref, Math.abs)), 1e-7 * largest);
    a.grads.view(name).forEach((v, i) => assert.ok(Math.abs(v - ref[i]!) <= tolerance, `${name}[${i}]: gathered ${v} vs full ${ref[i]}`));
  }
});

test('a batch with more labelled positions than K runs the full-positions graph (nothing dropped), warning once with the count and K', async () => {
  const params = initAlbertParams(config, 5);
  const batch = syntheticBatch(config, 3, 16, new Rng(2));
  const labels = Int32Array.from(batch.inputIds, (id) => (id === 2 || id === 3 ? -100 : id)); // every non-special token
  const crowded = { ...batch, labels };
  const warnings: string[] = [];
  const log = { warn: (_obj: unknown, msg?: string) => void warnings.push(msg ?? ''), info: () => undefined };
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, log });
  const full = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, mlmProbability: 1 });
  const a = await backend.forwardBackward(params, crowded);
  await backend.forwardBackward(params, crowded);
  const b = await full.forwardBackward(params, crowded);
  await backend.close();
  await full.close();
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, new RegExp(`batch has ${labels.filter((l) => l !== -100).length} labelled positions, more than the ${mlmCapacity(3, 16)} `));
  assert.equal(a.loss, b.loss);
  assert.equal(a.mlmAccuracy, b.mlmAccuracy);
});

test('profileFilePrefix: closing the backend leaves onnxruntime\'s profile of its runs, which the engine bench reads', async (t) => {
  const dir = tmpDir(t, 'cohort-profile-test-');
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1, profileFilePrefix: path.join(dir, 'ort') });
  await backend.forwardBackward(initAlbertParams(config, 1), syntheticBatch(config, 2, 16, new Rng(4)));
  await backend.close();
  const files = fs.readdirSync(dir).filter((f) => f.startsWith('ort') && f.endsWith('.json'));
  assert.equal(files.length, 1, `one profile for one session: ${files.join(', ')}`);
  const profile = lastRunProfile(path.join(dir, files[0]!));
  assert.ok(profile.matmulMs > 0 && profile.matmulMs < profile.kernelMs && profile.kernelMs <= profile.runMs, JSON.stringify(profile));
});
