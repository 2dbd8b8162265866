import assert from 'node:assert/strict';
import test from 'node:test';
import { probeProvider } from '../../src/doctor/ort-probe.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import type { AlbertBatch } from '../../src/engine/batch.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';

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
  const warnings: unknown[] = [];
  const log = { warn: (obj: unknown) => void warnings.push(obj), info: () => undefined };
  const auto = new OrtBackend(config, { provider: 'auto', intraOpThreads: 1, log });
  const r = await auto.forwardBackward(params, batch);
  await auto.close();
  assert.ok(Number.isFinite(r.loss));
  assert.equal(warnings.length, 1);
  assert.match(JSON.stringify(warnings[0]), /reason/);
  assert.match(auto.description, /cpu/);
});
