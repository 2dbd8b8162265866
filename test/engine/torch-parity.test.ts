import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { encodeParams } from '../../src/engine/albert/checkpoint.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { batchToJson } from '../../src/engine/batch.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';
import { ROOT } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

const PYTHON = process.env.COHORT_PYTHON ?? '/usr/bin/python3';
const hasTorch = spawnSync(PYTHON, ['-c', 'import torch'], { timeout: 60_000 }).status === 0;

// An independent implementation: bench/engine_torch.py, plain torch modules laid out as HF's, loading
// our model.safetensors by HF names. Tolerance: float32 on both sides, |Δloss| ≤ 1e-4 and every
// gradient within 1e-3 of its tensor's largest magnitude + 1e-7
// (key.bias has an exactly-zero true gradient: softmax ignores a per-row shift; both sides give ~1e-10).
test('ORT engine matches a PyTorch ALBERT (loss, MLM/SOP losses, every gradient by HF name)', { skip: hasTorch ? false : `${PYTHON} cannot import torch` }, async (t) => {
  const dir = tmpDir(t);
  const config = PRESETS.tiny;
  const params = initAlbertParams({ ...config, initializerRange: 0.1 }, 4);
  const batch = syntheticBatch(config, 3, 16, new Rng(6));
  // padding at the end of row 1: pad ids (torch's padding_idx row gets no lookup gradient), masked, unlabelled
  batch.attentionMask.fill(0, 16 + 12, 32);
  batch.inputIds.fill(config.padTokenId, 16 + 12, 32);
  batch.labels.fill(-100, 16 + 12, 32);
  // …and the pad id at an attended position of row 0, where its lookup would otherwise get a gradient
  batch.inputIds[5] = config.padTokenId;
  fs.writeFileSync(path.join(dir, 'model.safetensors'), encodeParams(params));
  fs.writeFileSync(path.join(dir, 'batch.json'), JSON.stringify(batchToJson(batch)));
  const r = spawnSync(PYTHON, [path.join(ROOT, 'bench', 'engine_torch.py'), JSON.stringify({ config, check: { weights: path.join(dir, 'model.safetensors'), batch: path.join(dir, 'batch.json') } })], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, r.stderr);
  const torch = JSON.parse(r.stdout) as { loss: number; mlm_loss: number; sop_loss: number; grads: Record<string, number[]> };

  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const ours = await backend.forwardBackward(params, batch);
  await backend.close();
  assert.ok(Math.abs(ours.loss - torch.loss) <= 1e-4, `loss ${ours.loss} vs torch ${torch.loss}`);
  assert.ok(Math.abs(ours.mlmLoss - torch.mlm_loss) <= 1e-4, `mlm ${ours.mlmLoss} vs ${torch.mlm_loss}`);
  assert.ok(Math.abs(ours.sopLoss - torch.sop_loss) <= 1e-4, `sop ${ours.sopLoss} vs ${torch.sop_loss}`);
  assert.deepEqual(Object.keys(torch.grads).sort(), params.names().sort());
  // the pad row separately, at its own scale: torch passes it no gradient from the input lookup
  const E = config.embeddingSize;
  const padRow = torch.grads['albert.embeddings.word_embeddings.weight']!.slice(config.padTokenId * E, (config.padTokenId + 1) * E);
  const padScale = Math.max(...padRow.map(Math.abs));
  ours.grads.view('albert.embeddings.word_embeddings.weight').subarray(config.padTokenId * E, (config.padTokenId + 1) * E).forEach((v, i) => {
    assert.ok(Math.abs(v - padRow[i]!) <= 1e-3 * padScale, `pad row [${i}]: ${v} vs torch ${padRow[i]}`);
  });
  for (const name of params.names()) {
    const ref = torch.grads[name]!;
    const scale = Math.max(...ref.map(Math.abs), 1e-6);
    ours.grads.view(name).forEach((v, i) => assert.ok(Math.abs(v - ref[i]!) <= 1e-3 * scale + 1e-7, `${name}[${i}]: ${v} vs torch ${ref[i]}`));
  }
});
