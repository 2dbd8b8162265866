/**
 * Per-tensor wire compression for averaging, as hivemind offers it: none, fp16, 8-bit uniform
 * (mean/std scaling with a 256-entry lookup of bucket means) and blockwise 8-bit (per-block absmax);
 * and blockwise 4-bit, QLoRA's NF4 (per-block absmax, codes into bitsandbytes' normal-float codebook).
 * Encoded parts arrive from strangers: `decode` checks every length before reading.
 */
import { floatToHalf, halfToFloat } from '../engine/fp16.js';

export const COMPRESSIONS = ['none', 'fp16', 'uniform8', 'blockwise8', 'blockwise4'] as const;
export type Compression = (typeof COMPRESSIONS)[number];

export class CompressionError extends Error {
  override readonly name = 'CompressionError';
}

/** hivemind's Uniform8BitQuantization: the 256 buckets span ±3 standard deviations around the mean. */
const UNIFORM_RANGE_IN_SIGMAS = 6;
const UNIFORM_BINS = 256;
/** Values per absmax block (bitsandbytes uses 4096). */
export const BLOCK_SIZE = 4096;
/** Values per absmax block of `blockwise4` (bitsandbytes' 4-bit default: a finer scale for a coarser code). */
export const NF4_BLOCK_SIZE = 64;
/**
 * bitsandbytes' NF4 codebook (`get_4bit_type('nf4')`, QLoRA): quantiles of N(0, 1) normalised to
 * [−1, 1], with exact 0 and ±1, as float32. Code k decodes to NF4[k] × the block's absmax.
 */
const NF4 = Float32Array.of(
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
);
/**
 * Midpoints between neighbouring NF4 entries (and +∞ after the last): a value's code is how many of
 * them lie below it, which makes it the nearest entry.
 */
const NF4_MIDPOINTS = Float64Array.from({ length: NF4.length }, (_, k) => (k + 1 < NF4.length ? (NF4[k]! + NF4[k + 1]!) / 2 : Infinity));
/**
 * [−1, 1] in NF4_BINS equal bins, each mapped to the number of midpoints below its lower edge: the
 * bins (2/256 wide) are narrower than any gap between midpoints (≥ 0.080), so a value is one
 * comparison away from its code, and no midpoint lies within 2e-4 of a bin's edge, so rounding in the
 * bin's index cannot skip one. Encoding 72 MB took 0.74 s with a binary search of the midpoints, 0.15
 * s with this (blockwise8: 0.21 s; load 4).
 */
const NF4_BINS = 256;
const NF4_BIN_CODES = Uint8Array.from({ length: NF4_BINS }, (_, b) => NF4_MIDPOINTS.filter((m) => m < (2 * b) / NF4_BINS - 1).length);
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
    case 'blockwise4':
      return 4 * Math.ceil(n / NF4_BLOCK_SIZE) + Math.ceil(n / 2);
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
    case 'blockwise4':
      return encodeBlockwise4(values);
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
    case 'blockwise4':
      return decodeBlockwise4(bytes, n, out);
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
  const out = new Uint8Array(4 * UNIFORM_BINS + n);
  // a NaN or ±Inf among the values (and only they: float64 sums of float32 values stay finite): every
  // code decodes to NaN, which receivers refuse as the blockwise codecs' poisoned blocks; the buckets
  // would give finite values (all 0 for a NaN) that the average takes in at this peer's weight
  if (!Number.isFinite(mean + std)) {
    out.set(new Uint8Array(new Float32Array(UNIFORM_BINS).fill(Number.NaN).buffer), 0);
    return out;
  }
  const scale = (UNIFORM_RANGE_IN_SIGMAS * std) / UNIFORM_BINS || 1;
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

/**
 * NF4 in blocks of NF4_BLOCK_SIZE: all float32 absmax scales, then the codes two per byte (the first
 * of a pair in the low nibble). As in blockwise8, a NaN or ±Inf makes its block's scale non-finite,
 * so the whole block decodes to NaN/Inf, which every receiver refuses as it refuses them unencoded.
 */
function encodeBlockwise4(values: Float32Array): Uint8Array {
  const n = values.length;
  const blocks = Math.ceil(n / NF4_BLOCK_SIZE);
  const out = new Uint8Array(encodedSize('blockwise4', n));
  const scales = new Float32Array(blocks);
  const codes = out.subarray(4 * blocks);
  for (let b = 0; b < blocks; b++) {
    const end = Math.min(n, (b + 1) * NF4_BLOCK_SIZE);
    let absmax = 0;
    // Math.max, not a comparison: a NaN must reach the scale
    for (let i = b * NF4_BLOCK_SIZE; i < end; i++) absmax = Math.max(absmax, Math.abs(values[i]!));
    scales[b] = absmax;
    // a non-finite scale decodes the block to NaN/Inf whatever its codes: any code will do
    const inv = absmax > 0 && absmax < Infinity ? 1 / absmax : 0;
    for (let i = b * NF4_BLOCK_SIZE; i < end; i++) {
      const r = values[i]! * inv;
      // |0 turns a NaN into bin 0; r ≥ 1 (x = absmax, or a rounding above it) is the last bin
      let code = NF4_BIN_CODES[Math.min(NF4_BINS - 1, ((r + 1) * (NF4_BINS / 2)) | 0)]!;
      if (r > NF4_MIDPOINTS[code]!) code++;
      codes[i >> 1]! |= (i & 1) === 0 ? code : code << 4;
    }
  }
  out.set(new Uint8Array(scales.buffer), 0);
  return out;
}

function decodeBlockwise4(bytes: Uint8Array, n: number, out: Float32Array): Float32Array {
  const blocks = Math.ceil(n / NF4_BLOCK_SIZE);
  const scales = new Float32Array(blocks);
  new Uint8Array(scales.buffer).set(bytes.subarray(0, 4 * blocks));
  const codes = bytes.subarray(4 * blocks);
  // the 16 values of one block: 16 products per 64 values instead of one per value
  const table = new Float32Array(NF4.length);
  for (let b = 0; b < blocks; b++) {
    const scale = scales[b]!;
    for (let k = 0; k < NF4.length; k++) table[k] = NF4[k]! * scale;
    const end = Math.min(n, (b + 1) * NF4_BLOCK_SIZE);
    for (let i = b * NF4_BLOCK_SIZE; i < end; i++) {
      const byte = codes[i >> 1]!;
      out[i] = table[(i & 1) === 0 ? byte & 15 : byte >> 4]!;
    }
  }
  return out;
}
