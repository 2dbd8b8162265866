import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromJson, batchToJson, IGNORE_INDEX } from '../../src/engine/batch.js';
import { ParameterSet } from '../../src/engine/params.js';
import { decodeSafetensors, encodeSafetensors, fromFloat32, toFloat32, SafetensorsError } from '../../src/engine/safetensors.js';

test('ParameterSet lays parameters out contiguously with live named views', () => {
  const p = ParameterSet.allocate([
    { name: 'a', shape: [2, 3] },
    { name: 'b', shape: [4] },
  ]);
  assert.equal(p.size, 10);
  assert.deepEqual(p.spec('b'), { name: 'b', shape: [4], offset: 6, size: 4 });
  p.view('b').fill(7);
  assert.deepEqual(Array.from(p.data.subarray(6)), [7, 7, 7, 7]);
  const g = p.zerosLike();
  assert.ok(g.sameLayout(p));
  assert.equal(g.view('b')[0], 0);
  assert.equal(p.clone().view('b')[0], 7);
  assert.throws(() => p.view('c'), /no parameter named c/);
  assert.throws(() => ParameterSet.allocate([{ name: 'a', shape: [1] }, { name: 'a', shape: [1] }]), /declared twice/);
  assert.throws(() => ParameterSet.allocate([{ name: 'x', shape: [0, 2] }]), /invalid shape/);
});

test('safetensors round-trips tensors and metadata; the header is 8-byte aligned', () => {
  const w = new Float32Array([1.5, -2, 3.25, 0, 1e-8, -1e8]);
  const bytes = encodeSafetensors({ 'layer.weight': fromFloat32(w, [2, 3]), ids: { dtype: 'I64', shape: [1], bytes: new Uint8Array(8) } }, { format: 'pt' });
  const headerLen = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal((8 + headerLen) % 8, 0);
  const { tensors, metadata } = decodeSafetensors(bytes);
  assert.deepEqual(metadata, { format: 'pt' });
  assert.deepEqual(tensors.get('layer.weight')!.shape, [2, 3]);
  assert.deepEqual(Array.from(toFloat32('layer.weight', tensors.get('layer.weight')!)), Array.from(w));
  assert.throws(() => toFloat32('ids', tensors.get('ids')!), /not a floating-point type/);
});

test('safetensors converts F16 and BF16 to float32 exactly', () => {
  // 1.0 = 0x3c00 (f16) = 0x3f80 (bf16); -2.5 = 0xc100 (f16) = 0xc020 (bf16); f16 subnormal 0x0001 = 2^-24
  const f16 = new Uint8Array(new Uint16Array([0x3c00, 0xc100, 0x0001]).buffer);
  const bf16 = new Uint8Array(new Uint16Array([0x3f80, 0xc020]).buffer);
  assert.deepEqual(Array.from(toFloat32('h', { dtype: 'F16', shape: [3], bytes: f16 })), [1, -2.5, 2 ** -24]);
  assert.deepEqual(Array.from(toFloat32('b', { dtype: 'BF16', shape: [2], bytes: bf16 })), [1, -2.5]);
});

test('malformed safetensors files are rejected with the reason', () => {
  const good = encodeSafetensors({ w: fromFloat32(new Float32Array(4), [4]) });
  assert.throws(() => decodeSafetensors(good.subarray(0, 5)), /too short/);
  const hugeHeader = good.slice();
  new DataView(hugeHeader.buffer).setBigUint64(0, 1n << 40n, true);
  assert.throws(() => decodeSafetensors(hugeHeader), /exceeds the file/);
  const truncated = good.subarray(0, good.length - 4);
  assert.throws(() => decodeSafetensors(truncated), (e: unknown) => e instanceof SafetensorsError && /tensor w: data_offsets/.test(e.message));
  const badShape = encodeSafetensors({ w: fromFloat32(new Float32Array(4), [4]) });
  const text = Buffer.from(badShape).toString('latin1').replace('"shape":[4]', '"shape":[5]');
  assert.throws(() => decodeSafetensors(Buffer.from(text, 'latin1')), /shape \[5\] of F32 needs 20 bytes, found 16/);
});

test('JSON batches convert both ways, default missing masks, and reject bad values', () => {
  const json = { input_ids: [[2, 5, 3], [2, 6, 0]], labels: [[IGNORE_INDEX, 5, IGNORE_INDEX], [IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]], sentence_order_label: [0, 1] };
  const batch = batchFromJson(json, 10);
  assert.equal(batch.batchSize, 2);
  assert.equal(batch.seqLen, 3);
  assert.deepEqual(Array.from(batch.attentionMask), [1, 1, 1, 1, 1, 1]);
  assert.deepEqual(batchToJson(batch).input_ids, json.input_ids);
  assert.throws(() => batchFromJson({ ...json, input_ids: [[2, 5, 3], [2, 6]] }, 10), /labels must be 2 rows of 3|input_ids/);
  assert.throws(() => batchFromJson({ ...json, input_ids: [[2, 5, 30], [2, 6, 0]] }, 10), /input_ids\[0\]\[2\] = 30 is outside the vocabulary/);
  assert.throws(() => batchFromJson({ ...json, labels: [[-5, 5, 1], [1, 1, 1]] }, 10), /labels\[0\]\[0\] = -5/);
  assert.throws(() => batchFromJson({ ...json, sentence_order_label: [0, 2] }), /sentence_order_label/);
  assert.throws(() => batchFromJson({ input_ids: 'x' }), /batch: input_ids/);
});
