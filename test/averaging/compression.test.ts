import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BLOCK_SIZE, COMPRESSIONS, CompressionError, decode, encode, encodedSize } from '../../src/averaging/compression.js';
import { floatToHalf, halfToFloat } from '../../src/engine/fp16.js';

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
  // uniform8: step 6σ/256 plus hivemind's clamping of the tails beyond ±3σ (which dominates its error)
  const bounds = { none: 0, fp16: 2 ** -9, uniform8: 0.02, blockwise8: 0.012 } as const;
  for (const c of COMPRESSIONS) {
    const bytes = encode(c, x);
    assert.equal(bytes.byteLength, encodedSize(c, x.length), `${c} size`);
    const y = decode(c, bytes, x.length);
    const err = c === 'none' || c === 'fp16' ? maxAbsErr(x, y) : rms(x.map((v, i) => v - y[i]!));
    assert.ok(err <= bounds[c], `${c}: error ${err} > ${bounds[c]}`);
  }
  assert.ok(encodedSize('uniform8', x.length) < encodedSize('fp16', x.length) && encodedSize('fp16', x.length) < encodedSize('none', x.length));
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
