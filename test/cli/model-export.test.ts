// `cohort model export` on a store holding prepared data and model checkpoints: the directory it writes
// is read back with readers of its own (a safetensors header parsed by hand, the tokenizer's bytes
// hashed), against the names and shapes Hugging Face's AlbertForPreTraining has. No python3 with
// `transformers` on the test machines, so from_pretrained itself is not run here.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { prepareDataset } from '../../src/data/prepare.js';
import { TOKENIZER_CHECKPOINT } from '../../src/data/tokenizer-checkpoint.js';
import { checkConfig, configToHf, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer, encodeParams, saveModel } from '../../src/engine/index.js';
import { loadStateDir, SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { encodeTrainingState } from '../../src/collab/state.js';
import { openStore } from '../../src/store/index.js';
import { MODEL_CHECKPOINT } from '../../src/training/session.js';
import { cohortInProcess, runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

const QUIET = ['--log-level', 'error'];

/** AlbertForPreTraining's state_dict names and shapes (transformers' modeling_albert), one layer group of one layer. */
function hfAlbertTensors(c: { V: number; E: number; H: number; I: number; P: number; T: number }): Map<string, number[]> {
  const layer = 'albert.encoder.albert_layer_groups.0.albert_layers.0';
  return new Map<string, number[]>([
    ['albert.embeddings.word_embeddings.weight', [c.V, c.E]],
    ['albert.embeddings.position_embeddings.weight', [c.P, c.E]],
    ['albert.embeddings.token_type_embeddings.weight', [c.T, c.E]],
    ['albert.embeddings.LayerNorm.weight', [c.E]],
    ['albert.embeddings.LayerNorm.bias', [c.E]],
    ['albert.encoder.embedding_hidden_mapping_in.weight', [c.H, c.E]],
    ['albert.encoder.embedding_hidden_mapping_in.bias', [c.H]],
    ...['query', 'key', 'value', 'dense'].flatMap((m): Array<[string, number[]]> => [
      [`${layer}.attention.${m}.weight`, [c.H, c.H]],
      [`${layer}.attention.${m}.bias`, [c.H]],
    ]),
    [`${layer}.attention.LayerNorm.weight`, [c.H]],
    [`${layer}.attention.LayerNorm.bias`, [c.H]],
    [`${layer}.ffn.weight`, [c.I, c.H]],
    [`${layer}.ffn.bias`, [c.I]],
    [`${layer}.ffn_output.weight`, [c.H, c.I]],
    [`${layer}.ffn_output.bias`, [c.H]],
    [`${layer}.full_layer_layer_norm.weight`, [c.H]],
    [`${layer}.full_layer_layer_norm.bias`, [c.H]],
    ['albert.pooler.weight', [c.H, c.H]],
    ['albert.pooler.bias', [c.H]],
    ['predictions.bias', [c.V]],
    ['predictions.LayerNorm.weight', [c.E]],
    ['predictions.LayerNorm.bias', [c.E]],
    ['predictions.dense.weight', [c.E, c.H]],
    ['predictions.dense.bias', [c.E]],
    ['predictions.decoder.weight', [c.V, c.E]],
    ['predictions.decoder.bias', [c.V]],
    ['sop_classifier.classifier.weight', [2, c.H]],
    ['sop_classifier.classifier.bias', [2]],
  ]);
}

/** The safetensors header, parsed by hand: u64 little-endian length, then JSON. */
function safetensorsHeader(file: string): { tensors: Map<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>; dataBytes: number } {
  const bytes = fs.readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  delete header['__metadata__'];
  return { tensors: new Map(Object.entries(header)), dataBytes: bytes.length - 8 - n };
}

test('model export: the newest checkpoint (or one epoch) as config.json, model.safetensors with AlbertForPreTraining names, and the run’s tokenizer.json; a model directory exports the same', { timeout: 180_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const { info } = await prepareDataset({ store, dataDir, source: 'bundled', maxDocuments: 6, vocabSize: 1500, shardExamples: 25 });
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: info.vocabSize });
  for (const [epoch, seed] of [[3, 1], [7, 2]] as const) store.checkpoints.save({ kind: MODEL_CHECKPOINT, epoch, meta: { config: configToHf(config) }, data: encodeParams(initAlbertParams(config, seed)) });
  store.close();

  const out = path.join(dataDir, 'export');
  const r = await runCli(['model', 'export', '--out', out, '--data-dir', dataDir, ...QUIET]);
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(r.stdout) as { checkpoint: { epoch: number; kind: string }; tokenizerSha256: string; parameters: number };
  assert.deepEqual([result.checkpoint.epoch, result.checkpoint.kind, result.tokenizerSha256], [7, MODEL_CHECKPOINT, info.tokenizerHash], 'latest is the newest checkpoint');
  assert.deepEqual(fs.readdirSync(out).sort(), ['config.json', 'model.safetensors', 'tokenizer.json']);

  const hf = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8')) as Record<string, unknown>;
  assert.deepEqual(hf.architectures, ['AlbertForPreTraining']);
  assert.equal(hf.model_type, 'albert');
  const c = { V: hf.vocab_size as number, E: hf.embedding_size as number, H: hf.hidden_size as number, I: hf.intermediate_size as number, P: hf.max_position_embeddings as number, T: hf.type_vocab_size as number };
  assert.equal(c.V, info.vocabSize, 'the model’s vocabulary is the tokenizer’s');
  for (const key of ['num_hidden_layers', 'num_hidden_groups', 'inner_group_num', 'num_attention_heads', 'hidden_act', 'layer_norm_eps']) assert.ok(key in hf, `config.json lacks ${key}`);
  assert.equal(hf.num_hidden_groups, 1);
  assert.equal(hf.inner_group_num, 1);

  const { tensors, dataBytes } = safetensorsHeader(path.join(out, 'model.safetensors'));
  const expected = hfAlbertTensors(c);
  // the decoder shares the word embeddings and the prediction bias in HF (tied): a checkpoint may leave its copies out
  const tied = new Set(['predictions.decoder.weight', 'predictions.decoder.bias']);
  for (const [name, shape] of expected) {
    const got = tensors.get(name);
    if (got === undefined && tied.has(name)) continue;
    assert.ok(got, `model.safetensors lacks ${name}`);
    assert.deepEqual(got.shape, shape, name);
    assert.equal(got.dtype, 'F32', name);
    assert.equal(got.data_offsets[1] - got.data_offsets[0], 4 * shape.reduce((a, b) => a * b, 1), `${name}: its byte range fits its shape`);
  }
  assert.deepEqual([...tensors.keys()].filter((k) => !expected.has(k)), [], 'names AlbertForPreTraining does not have');
  assert.equal(Math.max(...[...tensors.values()].map((x) => x.data_offsets[1])), dataBytes, 'the data section is exactly the tensors');

  const tokenizer = fs.readFileSync(path.join(out, 'tokenizer.json'));
  assert.equal(createHash('sha256').update(tokenizer).digest('hex'), info.tokenizerHash, 'the tokenizer the data was prepared with');
  assert.deepEqual(tokenizer, fs.readFileSync(info.tokenizerFile));
  const vocab = (JSON.parse(tokenizer.toString('utf8')) as { model: { vocab: Record<string, number> } }).model.vocab;
  assert.equal(Object.keys(vocab).length, c.V);

  // an older epoch is another checkpoint; the exported directory exports to the same files
  const old = path.join(dataDir, 'export-3');
  const r3 = await runCli(['model', 'export', '--from', '3', '--out', old, '--data-dir', dataDir, ...QUIET]);
  assert.equal(r3.code, 0, r3.stderr);
  assert.equal((JSON.parse(r3.stdout) as typeof result).checkpoint.epoch, 3);
  assert.notDeepEqual(fs.readFileSync(path.join(old, 'model.safetensors')), fs.readFileSync(path.join(out, 'model.safetensors')));
  const again = path.join(dataDir, 'export-again');
  const rd = await runCli(['model', 'export', '--from', out, '--out', again, '--data-dir', dataDir, ...QUIET]);
  assert.equal(rd.code, 0, rd.stderr);
  for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) assert.deepEqual(fs.readFileSync(path.join(again, f)), fs.readFileSync(path.join(out, f)), f);

  // the tokenizer is now kept in the store: the export still works once the prepared data's file is gone
  fs.rmSync(info.tokenizerFile);
  const check = openStore(dataDir);
  assert.deepEqual(check.checkpoints.list(TOKENIZER_CHECKPOINT).map((x) => x.sha256), [info.tokenizerHash]);
  check.close();
});

test('model export: a bad --from exits 2; a missing epoch, a missing tokenizer, a directory that is no model or a missing database exit 1, saying what is missing in one line', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
  store.checkpoints.save({ kind: MODEL_CHECKPOINT, epoch: 2, meta: { config: configToHf(config) }, data: encodeParams(initAlbertParams(config, 1)) });
  store.close();
  const out = path.join(dataDir, 'out');
  const notModel = path.join(dataDir, 'not-a-model');
  fs.mkdirSync(notModel);
  // a model directory whose weights file was cut short (a copy interrupted, a full disk)
  const truncated = path.join(dataDir, 'truncated');
  saveModel(truncated, config, initAlbertParams(config, 1));
  const weights = path.join(truncated, 'model.safetensors');
  fs.truncateSync(weights, fs.statSync(weights).size - 100);
  const cases: Array<[string[], number, RegExp]> = [
    [['--from', notModel, '--out', out], 1, /^cohort: model directory \S+not-a-model: config\.json not found\n$/],
    [['--from', truncated, '--out', out], 1, /^cohort: \S+truncated\/model\.safetensors: tensor \S+: data_offsets \[\d+,\d+\] are outside the \d+ data bytes\n$/],
    [['--from', 'yesterday', '--out', out], 2, /--from: invalid value "yesterday"; accepted: latest, an epoch \(an integer ≥ 0\) or a model directory/],
    [[], 2, /--out/],
    [['--from', '5', '--out', out], 1, /no model checkpoint of epoch 5 in .*checkpoints\.db \(epochs held: 2\)/],
    [['--out', out], 1, /checkpoint \d+ \(model, epoch 2\) carries no tokenizer, and .* has no prepared data with its vocabulary of 64 tokens: prepare the run's data/],
  ];
  for (const [args, code, message] of cases) {
    const r = await cohortInProcess(['model', 'export', ...args, '--data-dir', dataDir]);
    assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(' '));
    assert.doesNotMatch(r.stderr, /\n\s+at /, `${args.join(' ')}: no stack`);
  }
  assert.equal(fs.existsSync(out), false, 'a failed export wrote nothing');
  const none = await cohortInProcess(['model', 'export', '--out', out, '--data-dir', path.join(dataDir, 'nothing-here')]);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /no Cohort database in .*nothing-here/);
});

test('model export: a bit-flipped or truncated newest checkpoint is reported and the older good one exported; an epoch with only a damaged one exits 1 saying why', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
  const tokenizer = store.checkpoints.save({ kind: TOKENIZER_CHECKPOINT, epoch: 0, data: Buffer.from('{"model":{}}') });
  const [good, flipped, truncated] = [2, 5, 7].map((epoch) => store.checkpoints.save({ kind: MODEL_CHECKPOINT, epoch, meta: { config: configToHf(config), tokenizerSha256: tokenizer.sha256 }, data: encodeParams(initAlbertParams(config, epoch)) }));
  // one bit of the weights flipped in place (the header is the first few hundred bytes)
  const chunk = store.checkpoints.db.prepare('SELECT data FROM checkpoint_chunks WHERE checkpoint_id = ? AND seq = 0').pluck().get(flipped!.id) as Buffer;
  chunk[5000]! ^= 0x10;
  store.checkpoints.db.prepare('UPDATE checkpoint_chunks SET data = ? WHERE checkpoint_id = ? AND seq = 0').run(chunk, flipped!.id);
  store.checkpoints.db.prepare('DELETE FROM checkpoint_chunks WHERE checkpoint_id = ? AND seq = (SELECT max(seq) FROM checkpoint_chunks WHERE checkpoint_id = ?)').run(truncated!.id, truncated!.id);
  store.close();

  const out = path.join(dataDir, 'out');
  const r = await runCli(['model', 'export', '--out', out, '--data-dir', dataDir]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal((JSON.parse(r.stdout) as { checkpoint: { id: number; epoch: number } }).checkpoint.id, good!.id, 'the newest checkpoint that verifies');
  assert.match(r.stderr, new RegExp(`skipping checkpoint ${truncated!.id} \\(model, epoch 7\\): .*has \\d+ of \\d+ chunks`));
  assert.match(r.stderr, new RegExp(`skipping checkpoint ${flipped!.id} \\(model, epoch 5\\): .*fails its checksum`));

  const only = await cohortInProcess(['model', 'export', '--from', '5', '--out', path.join(dataDir, 'out-5'), '--data-dir', dataDir]);
  assert.equal(only.code, 1);
  assert.match(only.stderr, /^cohort: no model checkpoint of epoch 5 in \S+checkpoints\.db is readable \(epochs held: 2, 5, 7\): checkpoint \d+ \(model, epoch 5\) fails its checksum/m);
  assert.doesNotMatch(only.stderr, /\n\s+at /, 'no stack');
  assert.equal(fs.existsSync(path.join(dataDir, 'out-5')), false, 'a failed export wrote nothing');
});

test('model export --state: a full-state checkpoint as a state directory that loads back with its epoch and optimizer state (what --resume-from reads); a model-only checkpoint is refused', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
  const tokenizer = store.checkpoints.save({ kind: TOKENIZER_CHECKPOINT, epoch: 0, data: Buffer.from('{"model":{}}') });
  const params = initAlbertParams(config, 4);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const grads = params.zerosLike();
  grads.data.forEach((_, i) => (grads.data[i] = Math.cos(i) * 1e-2));
  optimizer.step(params, grads, 1e-3);
  const moments = optimizer.exportState();
  store.checkpoints.save({ kind: SWARM_STATE_CHECKPOINT, epoch: 9, meta: { runId: 'r', tokenizerSha256: tokenizer.sha256 }, data: encodeTrainingState({ epoch: 9, config, params, optimizer: moments }) });
  store.checkpoints.save({ kind: MODEL_CHECKPOINT, epoch: 11, meta: { config: configToHf(config), tokenizerSha256: tokenizer.sha256 }, data: encodeParams(params) });
  store.close();

  const out = path.join(dataDir, 'state');
  const r = await runCli(['model', 'export', '--from', '9', '--state', '--out', out, '--data-dir', dataDir, ...QUIET]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(out).sort(), ['cohort-state.json', 'config.json', 'model.safetensors', 'optimizer.safetensors', 'tokenizer.json']);
  const loaded = loadStateDir(out);
  assert.equal(loaded.epoch, 9);
  assert.deepEqual(loaded.params.data, params.data);
  assert.equal(loaded.optimizer?.step, 1);
  assert.deepEqual(loaded.optimizer?.expAvg.data, moments.expAvg.data);
  assert.deepEqual(loaded.optimizer?.expAvgSq.data, moments.expAvgSq.data);

  const model = await cohortInProcess(['model', 'export', '--state', '--out', path.join(dataDir, 'model'), '--data-dir', dataDir]);
  assert.equal(model.code, 1);
  assert.match(model.stderr, /^cohort: checkpoint \d+ \(model, epoch 11\) holds no optimizer state: --state exports a full-state checkpoint/m);
});

test('model export --from a model directory that holds its tokenizer.json needs no data directory', async (t) => {
  const dir = tmpDir(t);
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
  const model = path.join(dir, 'epoch-000003');
  saveModel(model, config, initAlbertParams(config, 1));
  const tokenizer = Buffer.from('{"model":{"vocab":{}}}');
  fs.writeFileSync(path.join(model, 'tokenizer.json'), tokenizer);
  const out = path.join(dir, 'out');
  // a coordinator's checkpoint folder copied elsewhere: no --data-dir names a store, and none is needed
  const r = await runCli(['model', 'export', '--from', model, '--out', out, '--data-dir', path.join(dir, 'nothing-here'), ...QUIET]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal((JSON.parse(r.stdout) as { tokenizerSha256: string }).tokenizerSha256, createHash('sha256').update(tokenizer).digest('hex'));
  for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) assert.deepEqual(fs.readFileSync(path.join(out, f)), fs.readFileSync(path.join(model, f)), f);
  assert.equal(fs.existsSync(path.join(dir, 'nothing-here')), false, 'no data directory was created');
});
