import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { missingCudaProvider } from '../../src/engine/cuda-install.js';
import { decodeSafetensors, encodeSafetensors, type SafeTensor } from '../../src/engine/safetensors.js';
import { cohortInProcess, runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

const BATCH = {
  input_ids: [[2, 10, 4, 12, 3, 0], [2, 7, 8, 4, 3, 5]],
  token_type_ids: [[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1]],
  attention_mask: [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]],
  labels: [[-100, -100, 11, -100, -100, -100], [-100, -100, -100, 9, -100, -100]],
  sentence_order_label: [0, 1],
};
const QUIET = ['--log-level', 'error', '--provider', 'cpu'];

async function initModel(dir: string, extra: string[] = []) {
  const r = await runCli(['model', 'init', '--preset', 'tiny', '--seed', '5', '--out', dir, '--log-level', 'error', ...extra]);
  assert.equal(r.code, 0, r.stderr);
}

test('model init writes an HF config and state dict; model loss prints the five metrics; --grads names match the weights', async (t) => {
  const dir = tmpDir(t);
  await initModel(path.join(dir, 'm'));
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'm', 'config.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(config.model_type, 'albert');
  assert.deepEqual(config.architectures, ['AlbertForPreTraining']);
  const weights = decodeSafetensors(fs.readFileSync(path.join(dir, 'm', 'model.safetensors'))).tensors;
  assert.deepEqual(weights.get('albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight')!.shape, [config.intermediate_size, config.hidden_size]);
  fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(BATCH));
  const r = await runCli(['model', 'loss', '--model', path.join(dir, 'm'), '--batch', path.join(dir, 'b.json'), '--grads', path.join(dir, 'g.safetensors'), ...QUIET]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as Record<string, number>;
  assert.deepEqual(Object.keys(out).sort(), ['loss', 'mlm_accuracy', 'mlm_loss', 'sop_accuracy', 'sop_loss']);
  assert.ok(Math.abs(out.loss! - out.mlm_loss! - out.sop_loss!) < 1e-5);
  assert.ok(Math.abs(out.mlm_loss! - Math.log(config.vocab_size as number)) < 0.5, 'a fresh model predicts ≈ uniformly');
  const grads = decodeSafetensors(fs.readFileSync(path.join(dir, 'g.safetensors'))).tensors;
  assert.deepEqual([...grads.keys()].sort(), [...weights.keys()].sort());
  for (const [name, g] of grads) assert.deepEqual(g.shape, weights.get(name)!.shape, name);
});

test('model loss and train with --precision fp16: the same losses within fp16 tolerance, the loss scale reported', async (t) => {
  const dir = tmpDir(t);
  await initModel(path.join(dir, 'm'));
  fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(BATCH));
  const loss = (precision: string) => runCli(['model', 'loss', '--model', path.join(dir, 'm'), '--batch', path.join(dir, 'b.json'), '--precision', precision, ...QUIET]);
  const fp32 = await loss('fp32');
  const fp16 = await loss('fp16');
  assert.equal(fp16.code, 0, fp16.stderr);
  const [a, b] = [JSON.parse(fp32.stdout), JSON.parse(fp16.stdout)] as Array<Record<string, number>>;
  assert.equal(a!.loss_scale, undefined);
  assert.equal(b!.loss_scale, 65536, 'GradScaler\'s initial scale fits a fresh tiny model');
  assert.ok(Math.abs(a!.loss! - b!.loss!) < 2e-3 * a!.loss!, `fp32 ${a!.loss} vs fp16 ${b!.loss}`);
  const train = await runCli(['train', '--preset', 'tiny', '--steps', '2', '--batch-size', '2', '--seq-len', '16', '--precision', 'fp16', '--data-dir', dir, ...QUIET]);
  assert.equal(train.code, 0, train.stderr);
  const summary = JSON.parse(train.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
  assert.equal(summary.precision, 'fp16');
  assert.equal(summary.skipped_steps, 0);
  assert.ok(Number.isFinite(summary.loss));
});

test('a hand-made HF-layout checkpoint (aliases, buffers, other key order) gives the same loss; a misshaped tensor is named', async (t) => {
  const dir = tmpDir(t);
  await initModel(path.join(dir, 'm'));
  fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(BATCH));
  const original = decodeSafetensors(fs.readFileSync(path.join(dir, 'm', 'model.safetensors'))).tensors;
  // as transformers may save it: decoder bias under its tied alias, the tied decoder weight present,
  // the position_ids buffer, keys in reverse order
  const hf = new Map<string, SafeTensor>();
  for (const [name, tensor] of [...original].reverse()) hf.set(name === 'predictions.bias' ? 'predictions.decoder.bias' : name, tensor);
  hf.set('predictions.decoder.weight', original.get('albert.embeddings.word_embeddings.weight')!);
  const positions = new BigInt64Array(128).map((_, i) => BigInt(i));
  hf.set('albert.embeddings.position_ids', { dtype: 'I64', shape: [1, 128], bytes: new Uint8Array(positions.buffer) });
  fs.mkdirSync(path.join(dir, 'hf'));
  fs.copyFileSync(path.join(dir, 'm', 'config.json'), path.join(dir, 'hf', 'config.json'));
  fs.writeFileSync(path.join(dir, 'hf', 'model.safetensors'), encodeSafetensors(hf));
  const [a, b] = await Promise.all(['m', 'hf'].map((m) => runCli(['model', 'loss', '--model', path.join(dir, m), '--batch', path.join(dir, 'b.json'), ...QUIET])));
  assert.equal(a!.code, 0, a!.stderr);
  assert.equal(b!.code, 0, b!.stderr);
  assert.deepEqual(JSON.parse(b!.stdout), JSON.parse(a!.stdout));

  const ffn = 'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight';
  const bad = new Map(hf);
  const w = original.get(ffn)!;
  bad.set(ffn, { ...w, shape: [...w.shape].reverse() }); // [in, out]: not torch's layout
  fs.writeFileSync(path.join(dir, 'hf', 'model.safetensors'), encodeSafetensors(bad));
  const r = await runCli(['model', 'loss', '--model', path.join(dir, 'hf'), '--batch', path.join(dir, 'b.json'), ...QUIET]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`${ffn.replace(/\./g, '\\.')} has shape`));
  bad.delete(ffn);
  fs.writeFileSync(path.join(dir, 'hf', 'model.safetensors'), encodeSafetensors(bad));
  const missing = await runCli(['model', 'loss', '--model', path.join(dir, 'hf'), '--batch', path.join(dir, 'b.json'), ...QUIET]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /missing tensor albert\.encoder\.albert_layer_groups\.0\.albert_layers\.0\.ffn\.weight/);
});

test('model loss refuses NaN weights and an absurd config (vocab_size 2e9) with an error naming them, exit 1', async (t) => {
  const dir = tmpDir(t);
  await initModel(path.join(dir, 'm'));
  fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(BATCH));
  const weights = path.join(dir, 'm', 'model.safetensors');
  const tensors = decodeSafetensors(fs.readFileSync(weights)).tensors;
  const name = 'albert.embeddings.LayerNorm.weight';
  const w = tensors.get(name)!;
  const values = new Float32Array(new Uint8Array(w.bytes).buffer);
  values[3] = Number.NaN;
  tensors.set(name, { ...w, bytes: new Uint8Array(values.buffer) });
  fs.writeFileSync(weights, encodeSafetensors(tensors));
  const nan = await runCli(['model', 'loss', '--model', path.join(dir, 'm'), '--batch', path.join(dir, 'b.json'), ...QUIET]);
  assert.equal(nan.code, 1, nan.stdout);
  assert.equal(nan.stdout, '');
  assert.match(nan.stderr, /tensor albert\.embeddings\.LayerNorm\.weight holds NaN at element 3; weights must be finite numbers/);

  const configFile = path.join(dir, 'm', 'config.json');
  fs.writeFileSync(configFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(configFile, 'utf8')), vocab_size: 2e9 }));
  const huge = await runCli(['model', 'loss', '--model', path.join(dir, 'm'), '--batch', path.join(dir, 'b.json'), ...QUIET]);
  assert.equal(huge.code, 1);
  assert.match(huge.stderr, /vocab_size 2000000000 is beyond the largest supported \(1000000\)/);
  assert.doesNotMatch(huge.stderr, /RangeError|Array buffer allocation/);
});

test('bad flags exit 2 naming the flag', async (t) => {
  const dir = tmpDir(t);
  for (const [args, flag] of [
    [['model', 'init', '--preset', 'huge', '--out', dir], '--preset'],
    [['model', 'init', '--preset', 'tiny', '--seed', '1.5', '--out', dir], '--seed'],
    [['model', 'init', '--preset', 'tiny'], '--out'],
    [['model', 'loss', '--model', dir, '--batch', path.join(dir, 'none.json'), '--provider', 'tpu'], '--provider'],
    [['train', '--preset', 'tiny', '--steps', '0'], '--steps'],
    [['train', '--preset', 'tiny', '--steps', '2', '--optimizer', 'sgd'], '--optimizer'],
    [['train', '--preset', 'tiny', '--steps', '2', '--seq-len', '100000'], '--seq-len'],
    [['train', '--preset', 'tiny', '--steps', '2', '--precision', 'bf16'], '--precision'],
    [['model', 'loss', '--model', dir, '--batch', path.join(dir, 'none.json'), '--precision', 'half'], '--precision'],
    // the WebGPU provider's fp16 gradients are wrong: refused before anything runs
    [['train', '--preset', 'tiny', '--steps', '2', '--provider', 'webgpu', '--precision', 'fp16'], '--precision: fp16: the WebGPU provider trains in fp32 only'],
    [['model', 'loss', '--model', dir, '--batch', path.join(dir, 'none.json'), '--provider', 'webgpu', '--precision', 'fp16'], '--precision: fp16: the WebGPU provider'],
  ] as const) {
    const r = await runCli([...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.ok(r.stderr.includes(flag), `${args.join(' ')}: ${r.stderr}`);
  }
  await initModel(path.join(dir, 'm'));
  fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify({ ...BATCH, labels: [[1]] }));
  const r = await runCli(['model', 'loss', '--model', path.join(dir, 'm'), '--batch', path.join(dir, 'b.json'), ...QUIET]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--batch: .*labels/);
});

test('train runs a few steps on the labelled synthetic source and can save the model', async (t) => {
  const dir = tmpDir(t);
  const r = await runCli(['train', '--preset', 'tiny', '--steps', '3', '--batch-size', '2', '--seq-len', '16', '--out', path.join(dir, 'out'), '--data-dir', dir, ...QUIET]);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
  assert.equal(summary.data, 'synthetic', 'with no prepared dataset, auto falls back to synthetic batches');
  assert.equal(summary.steps, 3);
  assert.ok(Number.isFinite(summary.loss));
  assert.match(r.stderr, /3\/3 loss/);
  assert.ok(fs.existsSync(path.join(dir, 'out', 'model.safetensors')));
});

test('train skips steps whose loss is not finite and stops with advice after --max-bad-steps in a row', async (t) => {
  const dir = tmpDir(t);
  // an absurd learning rate blows the weights up after the first step: every later loss is NaN
  const r = await runCli(['train', '--preset', 'tiny', '--steps', '20', '--batch-size', '2', '--seq-len', '16', '--lr', '1e30', '--max-bad-steps', '3', '--out', path.join(dir, 'out'), '--data-dir', dir, '--log-level', 'warn']);
  assert.equal(r.code, 1, r.stderr);
  assert.equal((r.stderr.match(/skipped a step: its loss is NaN/g) ?? []).length, 3, r.stderr);
  assert.match(r.stderr, /cohort: the last 3 steps had a non-finite loss or gradient \(each skipped\); .*learning rate 1e\+30 is too high/);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
  assert.equal(fs.existsSync(path.join(dir, 'out')), false, 'no broken model is saved');
});

test('after `data prepare`, train reads the prepared dataset and sizes the vocabulary by its tokenizer', async (t) => {
  const dir = tmpDir(t);
  const prepared = await runCli(['data', 'prepare', '--max-documents', '3', '--vocab-size', '300', '--data-dir', dir, '--log-level', 'error'], { timeoutMs: 120_000 });
  assert.equal(prepared.code, 0, prepared.stderr);
  const r = await runCli(['train', '--preset', 'tiny', '--steps', '2', '--batch-size', '2', '--seq-len', '32', '--out', path.join(dir, 'out'), '--data-dir', dir, ...QUIET]);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
  assert.equal(summary.data, 'prepared');
  const tokenizers = fs.readdirSync(path.join(dir, 'data'), { recursive: true }).filter((f) => String(f).endsWith('tokenizer.json'));
  assert.equal(tokenizers.length, 1);
  const tokenizer = JSON.parse(fs.readFileSync(path.join(dir, 'data', String(tokenizers[0])), 'utf8')) as { model: { vocab: Record<string, number> } };
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'out', 'config.json'), 'utf8')) as { vocab_size: number };
  assert.equal(config.vocab_size, Object.keys(tokenizer.model.vocab).length);

  const mismatch = await runCli(['train', '--preset', 'tiny', '--steps', '1', '--vocab-size', '999', '--data-dir', dir, ...QUIET]);
  assert.equal(mismatch.code, 2);
  assert.match(mismatch.stderr, /--vocab-size: 999 differs from the prepared dataset's tokenizer/);
});

test('train --data prepared without a prepared dataset says how to make one', async (t) => {
  const r = await runCli(['train', '--preset', 'tiny', '--steps', '1', '--data', 'prepared', '--data-dir', tmpDir(t), ...QUIET]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /no prepared dataset .*run `cohort data prepare`/);
  const bad = await runCli(['train', '--preset', 'tiny', '--steps', '1', '--data', 'web']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--data/);
});

test('without the CUDA provider installed, the default provider choice says so in one warning and onnxruntime prints no load error of its own', async (t) => {
  if (missingCudaProvider() === undefined) return t.skip('the CUDA provider files are installed here');
  const dir = tmpDir(t);
  await initModel(path.join(dir, 'm'));
  fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(BATCH));
  const r = await runCli(['model', 'loss', '--model', path.join(dir, 'm'), '--batch', path.join(dir, 'b.json'), '--log-level', 'warn']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /CUDA execution provider unavailable; training on CPU/);
  assert.match(r.stderr, /installed without its CUDA provider/);
  assert.doesNotMatch(r.stderr, /ONNXRuntimeError|Failed to load library/);
});

test('model loss: a --model directory that cannot be loaded exits 1 naming the flag and what is wrong, in one line', async (t) => {
  const dir = tmpDir(t);
  const batch = path.join(dir, 'batch.json');
  fs.writeFileSync(batch, '{}');
  const empty = path.join(dir, 'empty');
  fs.mkdirSync(empty);
  const badConfig = path.join(dir, 'bad-config');
  fs.mkdirSync(badConfig);
  fs.writeFileSync(path.join(badConfig, 'config.json'), '{}');
  fs.writeFileSync(path.join(badConfig, 'model.safetensors'), 'not safetensors');
  for (const [model, message] of [
    [empty, /^cohort: --model: model directory \S+empty: config\.json not found\n$/],
    [badConfig, /^cohort: --model: \S+bad-config\/config\.json: vocab_size: /],
  ] as const) {
    const r = await cohortInProcess(['model', 'loss', '--model', model, '--batch', batch]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
});
