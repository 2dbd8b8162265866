/**
 * Per-tensor wire compression for averaging, as hivemind offers it: none, fp16, 8-bit uniform
 * (mean/std scaling with a 256-entry lookup of bucket means) and blockwise 8-bit (per-block absmax).
 * Encoded parts arrive from strangers: `decode` checks every length before reading.
 */
import { floatToHalf, halfToFloat } from '../engine/fp16.js';

export const COMPRESSIONS = ['none', 'fp16', 'uniform8', 'blockwise8'] as const;
export type Compression = (typeof COMPRESSIONS)[number];

export class CompressionError extends Error {
  override readonly name = 'CompressionError';
}

/** hivemind's Uniform8BitQuantization: the 256 buckets span ±3 standard deviations around the mean. */
const UNIFORM_RANGE_IN_SIGMAS = 6;
const UNIFORM_BINS = 256;
/** Values per absmax block (bitsandbytes uses 4096). */
export const BLOCK_SIZE = 4096;
const FP16_MAX = 65504;

/** Encoded size in bytes of `n` values, without encoding (for bandwidth planning and wire checks). */
export function encodedSize(compression: Compression, n: number): number {
  switch (compression) {
    case 'none':
      return 4 * n;
    case 'fp16':
      return 2 * n;
    case 'uniform8':
      return 4 * UNIFORM_BINS + n;
    case 'blockwise8':
      return 4 * Math.ceil(n / BLOCK_SIZE) + n;
  }
}

/** Encodes `values`; `none` is a view of their bytes, not a copy (they go to the wire as they are). */
export function encode(compression: Compression, values: Float32Array): Uint8Array {
  switch (compression) {
    case 'none':
      return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    case 'fp16':
      return encodeFp16(values);
    case 'uniform8':
      return encodeUniform8(values);
    case 'blockwise8':
      return encodeBlockwise8(values);
  }
}

/**
 * Decodes exactly `n` values into `out` (a new array unless given: a caller decoding straight into
 * its result saves an allocation and a copy per chunk); throws CompressionError if the bytes do not
 * fit that count.
 */
export function decode(compression: Compression, bytes: Uint8Array, n: number, out: Float32Array = new Float32Array(n)): Float32Array {
  const expected = encodedSize(compression, n);
  if (bytes.byteLength !== expected) throw new CompressionError(`${compression} part of ${n} values must be ${expected} bytes, got ${bytes.byteLength}`);
  if (out.length !== n) throw new RangeError(`cannot decode ${n} values into an array of ${out.length}`);
  switch (compression) {
    case 'none': {
      new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes);
      return out;
    }
    case 'fp16': {
      const table = halfTable();
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let i = 0; i < n; i++) out[i] = table[view.getUint16(2 * i, true)]!;
      return out;
    }
    case 'uniform8': {
      const lookup = new Float32Array(UNIFORM_BINS);
      new Uint8Array(lookup.buffer).set(bytes.subarray(0, 4 * UNIFORM_BINS));
      const codes = bytes.subarray(4 * UNIFORM_BINS);
      for (let i = 0; i < n; i++) out[i] = lookup[codes[i]!]!;
      return out;
    }
    case 'blockwise8': {
      const blocks = Math.ceil(n / BLOCK_SIZE);
      const scales = new Float32Array(blocks);
      new Uint8Array(scales.buffer).set(bytes.subarray(0, 4 * blocks));
      const codes = new Int8Array(bytes.buffer, bytes.byteOffset + 4 * blocks, n);
      for (let i = 0; i < n; i++) out[i] = (codes[i]! * scales[Math.floor(i / BLOCK_SIZE)]!) / 127;
      return out;
    }
  }
}

let halfValues: Float32Array | undefined;

/** All 65536 binary16 values as float32: decoding a 72 MB gradient is a table lookup per value. */
function halfTable(): Float32Array {
  if (halfValues === undefined) {
    halfValues = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) halfValues[h] = halfToFloat(h);
  }
  return halfValues;
}

function encodeFp16(values: Float32Array): Uint8Array {
  const out = new Uint8Array(2 * values.length);
  const view = new DataView(out.buffer);
  // clamp like hivemind's Float16Compression so large values saturate instead of becoming Inf
  for (let i = 0; i < values.length; i++) view.setUint16(2 * i, floatToHalf(Math.max(-FP16_MAX, Math.min(FP16_MAX, values[i]!))), true);
  return out;
}

function encodeUniform8(values: Float32Array): Uint8Array {
  const n = values.length;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += values[i]!;
  mean = n > 0 ? mean / n : 0;
  let sq = 0;
  for (let i = 0; i < n; i++) sq += (values[i]! - mean) ** 2;
  const std = n > 1 ? Math.sqrt(sq / (n - 1)) : 0;
  const scale = (UNIFORM_RANGE_IN_SIGMAS * std) / UNIFORM_BINS || 1;
  const out = new Uint8Array(4 * UNIFORM_BINS + n);
  const codes = out.subarray(4 * UNIFORM_BINS);
  const sums = new Float64Array(UNIFORM_BINS);
  const counts = new Uint32Array(UNIFORM_BINS);
  for (let i = 0; i < n; i++) {
    const code = Math.max(0, Math.min(UNIFORM_BINS - 1, Math.round((values[i]! - mean) / scale) + UNIFORM_BINS / 2));
    codes[i] = code;
    sums[code]! += values[i]!;
    counts[code]!++;
  }
  // each code decodes to the mean of the values it stands for, which minimises the error per bucket
  const lookup = new Float32Array(UNIFORM_BINS);
  for (let b = 0; b < UNIFORM_BINS; b++) lookup[b] = counts[b]! > 0 ? sums[b]! / counts[b]! : 0;
  out.set(new Uint8Array(lookup.buffer), 0);
  return out;
}

function encodeBlockwise8(values: Float32Array): Uint8Array {
  const n = values.length;
  const blocks = Math.ceil(n / BLOCK_SIZE);
  const out = new Uint8Array(4 * blocks + n);
  const scales = new Float32Array(blocks);
  const codes = new Int8Array(out.buffer, 4 * blocks, n);
  for (let b = 0; b < blocks; b++) {
    const end = Math.min(n, (b + 1) * BLOCK_SIZE);
    let absmax = 0;
    for (let i = b * BLOCK_SIZE; i < end; i++) absmax = Math.max(absmax, Math.abs(values[i]!));
    scales[b] = absmax;
    const inv = absmax > 0 ? 127 / absmax : 0;
    for (let i = b * BLOCK_SIZE; i < end; i++) codes[i] = Math.round(values[i]! * inv);
  }
  out.set(new Uint8Array(scales.buffer), 0);
  return out;
}
