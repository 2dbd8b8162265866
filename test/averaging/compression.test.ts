import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BLOCK_SIZE, COMPRESSIONS, CompressionError, decode, encode, encodedSize, NF4_BLOCK_SIZE } from '../../src/averaging/compression.js';
import { floatToHalf, halfToFloat } from '../../src/engine/fp16.js';
import { randomVector } from './helpers.js';

/** Deterministic standard-normal-ish values (Box–Muller over a small LCG). */
function gaussian(n: number, seed = 1, scale = 1): Float32Array {
  let s = seed >>> 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 2 ** 32;
  return Float32Array.from({ length: n }, () => scale * Math.sqrt(-2 * Math.log(rand())) * Math.cos(2 * Math.PI * rand()));
}

const maxAbsErr = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);
const rms = (a: Float32Array) => Math.sqrt(a.reduce((s, x) => s + x * x, 0) / a.length);

test('fp16 conversion is exact on representable values and rounds to nearest even', () => {
  for (const v of [0, 1, -2.5, 65504, 2 ** -14, 2 ** -24, 0.333251953125]) assert.equal(halfToFloat(floatToHalf(v)), v);
  assert.equal(floatToHalf(1 + 2 ** -11), floatToHalf(1), 'halfway between 1 and the next half rounds to even (1)');
  assert.equal(halfToFloat(floatToHalf(1 + 3 * 2 ** -11)), 1 + 2 * 2 ** -10, 'halfway with an odd lower neighbour rounds up');
  assert.equal(halfToFloat(floatToHalf(1e6)), Infinity);
  assert.ok(Number.isNaN(halfToFloat(floatToHalf(Number.NaN))));
  assert.equal(halfToFloat(floatToHalf(2 ** -26)), 0, 'below half the smallest subnormal underflows to zero');
});

test('every codec round-trips with its stated error bound and its exact encoded size', () => {
  const x = gaussian(3 * BLOCK_SIZE + 77, 7);
  // fp16: half an ulp at |x| < 8; blockwise8: RMS of a uniform quantiser of step absmax/127;
  // uniform8: step 6σ/256 plus hivemind's clamping of the tails beyond ±3σ (which dominates its error);
  // blockwise4: NF4's RMS error on normal values, ≈ 0.037 × a block's absmax (≈ 2.5 for 64 normals): 0.092
  const bounds = { none: 0, fp16: 2 ** -9, uniform8: 0.02, blockwise8: 0.012, blockwise4: 0.1 } as const;
  for (const c of COMPRESSIONS) {
    const bytes = encode(c, x);
    assert.equal(bytes.byteLength, encodedSize(c, x.length), `${c} size`);
    const y = decode(c, bytes, x.length);
    const err = c === 'none' || c === 'fp16' ? maxAbsErr(x, y) : rms(x.map((v, i) => v - y[i]!));
    assert.ok(err <= bounds[c], `${c}: error ${err} > ${bounds[c]}`);
  }
  assert.ok(encodedSize('uniform8', x.length) < encodedSize('fp16', x.length) && encodedSize('fp16', x.length) < encodedSize('none', x.length));
  assert.ok(encodedSize('blockwise4', x.length) < 0.57 * encodedSize('blockwise8', x.length), '4.5 bits per value with the scales');
});

test('fp16 saturates instead of overflowing to infinity', () => {
  const y = decode('fp16', encode('fp16', new Float32Array([1e9, -1e9])), 2);
  assert.deepEqual(Array.from(y), [65504, -65504]);
});

test('8-bit codecs keep constant and all-zero inputs exact', () => {
  for (const c of ['uniform8', 'blockwise8'] as const) {
    assert.deepEqual(Array.from(decode(c, encode(c, new Float32Array(10).fill(0)), 10)), new Array(10).fill(0));
    const constant = decode(c, encode(c, new Float32Array(10).fill(0.75)), 10);
    assert.ok(maxAbsErr(constant, new Float32Array(10).fill(0.75)) < 1e-6, c);
  }
});

test('decode refuses bytes that do not fit the expected value count', () => {
  const bytes = encode('fp16', new Float32Array(8));
  assert.throws(() => decode('fp16', bytes, 9), (e: unknown) => e instanceof CompressionError && /must be 18 bytes, got 16/.test(e.message));
  assert.throws(() => decode('uniform8', new Uint8Array(10), 10), CompressionError);
  assert.throws(() => decode('none', new Uint8Array(7), 2), CompressionError);
});

/** bitsandbytes' `get_4bit_type('nf4')`, written out here so that the test checks the codec's copy. */
const NF4_CODEBOOK = [
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
].map(Math.fround);

/** The slow reference of blockwise4's bytes: per block of 64 its absmax, each value the nearest NF4 entry by a scan of all 16. */
function referenceBlockwise4(x: Float32Array): Uint8Array {
  const blocks = Math.ceil(x.length / 64);
  const bytes = new Uint8Array(4 * blocks + Math.ceil(x.length / 2));
  const view = new DataView(bytes.buffer);
  for (let b = 0; b < blocks; b++) {
    const block = x.subarray(64 * b, 64 * (b + 1));
    const absmax = block.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    view.setFloat32(4 * b, absmax, true);
    for (const [j, v] of block.entries()) {
      const r = absmax === 0 ? 0 : v / absmax;
      let code = 0;
      for (let k = 1; k < 16; k++) if (Math.abs(r - NF4_CODEBOOK[k]!) < Math.abs(r - NF4_CODEBOOK[code]!)) code = k;
      const i = 64 * b + j;
      bytes[4 * blocks + Math.floor(i / 2)]! |= i % 2 === 0 ? code : code << 4;
    }
  }
  return bytes;
}

/** Uniform values in [−1, 1], each block of 64 scaled by its own factor (so that a scale shared across blocks shows). */
function blockScaled(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const factors = [1, 1e-3, 250, 0.5, 3e-30];
  return Float32Array.from({ length: n }, (_, i) => (2 * rand() - 1) * factors[Math.floor(i / 64) % factors.length]!);
}

test('blockwise4: per block of 64 a float32 absmax, then the nearest NF4 code of each value, two per byte, the first in the low nibble', () => {
  for (const n of [0, 1, 2, 63, 64, 65, 127, 128, 129, 1001, 4096 + 33]) {
    const x = blockScaled(n, n + 1);
    const bytes = encode('blockwise4', x);
    assert.equal(bytes.byteLength, encodedSize('blockwise4', n), `size of ${n} values`);
    assert.equal(bytes.byteLength, 4 * Math.ceil(n / 64) + Math.ceil(n / 2));
    assert.deepEqual(bytes, referenceBlockwise4(x), `bytes of ${n} values`);
    // decoding: codebook[code] × absmax, as float32
    const view = new DataView(bytes.buffer, bytes.byteOffset);
    const blocks = Math.ceil(n / 64);
    const expected = Float32Array.from(x, (_, i) => NF4_CODEBOOK[(bytes[4 * blocks + Math.floor(i / 2)]! >> (4 * (i % 2))) & 15]! * view.getFloat32(4 * Math.floor(i / 64), true));
    assert.deepEqual(decode('blockwise4', bytes, n), expected, `decoded ${n} values`);
  }
  assert.equal(NF4_BLOCK_SIZE, 64);
  assert.deepEqual([encodedSize('blockwise4', 64), encodedSize('blockwise4', 65), encodedSize('blockwise4', 1_000_000)], [36, 41, 562_500]);
});

test('blockwise4 round-trips values in [−1, 1] within half the largest NF4 gap of each block’s absmax (0.152), 0.041 on average', () => {
  const n = 100_003;
  const x = randomVector(n, 3);
  const y = decode('blockwise4', encode('blockwise4', x), n);
  let sum = 0;
  for (let b = 0; b < n; b += 64) {
    const block = x.subarray(b, b + 64);
    const absmax = block.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    for (let i = b; i < b + block.length; i++) {
      const err = Math.abs(x[i]! - y[i]!);
      assert.ok(err <= 0.152 * absmax, `value ${i}: ${x[i]} decoded as ${y[i]}, off by ${err / absmax} of the block's absmax`);
      sum += err;
    }
  }
  // measured 0.0405: the normal-float entries are denser near 0 than uniform values need
  assert.ok(sum / n <= 0.041, `mean abs error ${sum / n}`);
});

test('blockwise4 decodes exact zeros, ±absmax and an all-zero block exactly', () => {
  // blocks: absmax 0.75 (both signs), all zeros, absmax 300 at a negative value, subnormal values (absmax 1e-40)
  const x = blockScaled(200, 9).map((v, i) => (i < 64 ? v / 2 : i < 128 ? 0 : i < 192 ? v : v * 1e-41));
  Object.assign(x, { 0: 0, 1: 0.75, 2: -0.75, 130: -300, 131: 0, 198: 1e-40, 199: -1e-40 });
  const y = decode('blockwise4', encode('blockwise4', x), x.length);
  for (const i of [0, 1, 2, 130, 131, 198, 199]) assert.equal(y[i], x[i], `value ${i}`);
  assert.ok(y.subarray(64, 128).every((v) => Object.is(v, 0)), 'an all-zero block decodes to +0');
});

test('decode refuses blockwise4 bytes of another length than the value count needs', () => {
  const bytes = encode('blockwise4', blockScaled(64, 1));
  assert.throws(() => decode('blockwise4', bytes, 65), (e: unknown) => e instanceof CompressionError && /blockwise4 part of 65 values must be 41 bytes, got 36/.test(e.message));
  assert.throws(() => decode('blockwise4', bytes.subarray(1), 64), CompressionError);
  assert.throws(() => decode('blockwise4', new Uint8Array(37), 64), CompressionError);
});

test('blockwise codecs: a NaN or ±Inf poisons only its own block, whether in the values or in a received scale; a negative scale negates its block', () => {
  for (const [c, block] of [['blockwise8', BLOCK_SIZE], ['blockwise4', NF4_BLOCK_SIZE]] as const) {
    const n = 2 * block + 10;
    const x = blockScaled(n, 5);
    assert.equal(Math.ceil(n / block), 3, `${c}: three blocks, the middle one altered`);
    const good = decode(c, encode(c, x), n);
    const rest = (y: Float32Array) => [...y.subarray(0, block), ...y.subarray(2 * block)];
    // a sender whose values are not finite: the receiver sees non-finite values and refuses them
    for (const bad of [Number.NaN, Infinity, -Infinity]) {
      const poisoned = x.slice();
      poisoned[block + 3] = bad;
      const y = decode(c, encode(c, poisoned), n);
      assert.ok(y.subarray(block, 2 * block).every((v) => !Number.isFinite(v)), `${c}: ${bad} in the values poisons its block`);
      assert.deepEqual(rest(y), rest(good), `${c}: the other blocks keep their values`);
    }
    // a stranger's bytes with a bad scale decode without throwing; what is not finite is refused by the averaging's checks
    for (const scale of [Number.NaN, Infinity, -Infinity, -2]) {
      const bytes = encode(c, x);
      new DataView(bytes.buffer).setFloat32(4, scale, true);
      const y = decode(c, bytes, n);
      const decodedBlock = y.subarray(block, 2 * block);
      if (scale === -2) {
        const positive = encode(c, x);
        new DataView(positive.buffer).setFloat32(4, 2, true);
        assert.deepEqual(decodedBlock, decode(c, positive, n).subarray(block, 2 * block).map((v) => -v), `${c}: a negative scale negates its block`);
      } else assert.ok(decodedBlock.every((v) => !Number.isFinite(v)), `${c}: a scale of ${scale} poisons its block`);
      assert.deepEqual(rest(y), rest(good), `${c}: the other blocks keep their values`);
    }
  }
});

test('uniform8: a NaN or ±Inf among the values decodes every value of the part to NaN, which the averaging refuses, not to finite values it would accept', () => {
  const x = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i));
  for (const bad of [Number.NaN, Infinity, -Infinity]) {
    const poisoned = x.slice();
    poisoned[17] = bad;
    const y = decode('uniform8', encode('uniform8', poisoned), x.length);
    assert.ok(y.every((v) => Number.isNaN(v)), `${bad} among the values: decoded ${y.slice(0, 4).join(', ')}, …`);
  }
});
