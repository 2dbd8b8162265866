/**
 * The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
 * `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}}`, then the
 * raw little-endian tensor bytes. Files come from strangers' peers and the internet, so every field
 * is checked before use.
 */
import { endianness } from 'node:os';
import { floatToHalf, HALF_MAX, halfToFloat } from './fp16.js';
import { concatBytes } from '../util/bytes.js';

export type SafeDtype = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

const DTYPE_BYTES: Record<SafeDtype, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

// Float32Array bytes are the platform's; safetensors is little-endian
const LITTLE_ENDIAN = endianness() === 'LE';

/** Header larger than this is refused (real ALBERT headers are a few KiB). */
const MAX_HEADER_BYTES = 16 * 1024 * 1024;

export interface SafeTensor {
  readonly dtype: SafeDtype;
  readonly shape: readonly number[];
  /** Raw little-endian bytes (a view into the file's buffer when decoded). */
  readonly bytes: Uint8Array;
}

export class SafetensorsError extends Error {
  override readonly name = 'SafetensorsError';
}

export function encodeSafetensors(tensors: ReadonlyMap<string, SafeTensor> | Record<string, SafeTensor>, metadata: Record<string, string> = {}): Uint8Array {
  return concatBytes(safetensorsPieces(tensors, metadata));
}

/**
 * A safetensors file as pieces whose concatenation is `encodeSafetensors`' bytes: the header, then
 * each tensor's bytes as given (not copied), so a large file can be hashed and written piece by piece.
 */
export function safetensorsPieces(tensors: ReadonlyMap<string, SafeTensor> | Record<string, SafeTensor>, metadata: Record<string, string> = {}): Uint8Array[] {
  // (`instanceof Map` would narrow to Map<any, any>; this keeps the element types)
  const entries = Symbol.iterator in tensors ? [...tensors] : Object.entries(tensors);
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of entries) {
    checkTensor(name, t.dtype, t.shape, t.bytes.byteLength);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.byteLength] };
    offset += t.bytes.byteLength;
  }
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const pad = (8 - (json.length % 8)) % 8; // the format pads the header with spaces to 8-byte alignment
  const head = Buffer.alloc(8 + json.length + pad, 0x20);
  head.writeBigUInt64LE(BigInt(json.length + pad), 0);
  json.copy(head, 8);
  return [head, ...entries.map(([, t]) => t.bytes)];
}

export function decodeSafetensors(file: Uint8Array): { tensors: Map<string, SafeTensor>; metadata: Record<string, string> } {
  if (file.byteLength < 8) throw new SafetensorsError(`file is ${file.byteLength} bytes, too short for a safetensors header`);
  const headerLength = new DataView(file.buffer, file.byteOffset, 8).getBigUint64(0, true);
  if (headerLength > BigInt(Math.min(MAX_HEADER_BYTES, file.byteLength - 8))) throw new SafetensorsError(`header length ${headerLength} exceeds the file (${file.byteLength} bytes) or the ${MAX_HEADER_BYTES}-byte limit`);
  const dataStart = 8 + Number(headerLength);
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(file.buffer, file.byteOffset + 8, Number(headerLength)).toString('utf8'));
  } catch (err) {
    throw new SafetensorsError(`header is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new SafetensorsError('header is not a JSON object');
  const tensors = new Map<string, SafeTensor>();
  let metadata: Record<string, string> = {};
  const dataLength = file.byteLength - dataStart;
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof entry !== 'object' || entry === null || Object.values(entry).some((v) => typeof v !== 'string')) throw new SafetensorsError('__metadata__ must map strings to strings');
      metadata = entry as Record<string, string>;
      continue;
    }
    const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e.dtype !== 'string' || !(e.dtype in DTYPE_BYTES)) throw new SafetensorsError(`tensor ${name}: unknown dtype ${JSON.stringify(e.dtype)}`);
    if (!Array.isArray(e.shape) || e.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) throw new SafetensorsError(`tensor ${name}: invalid shape ${JSON.stringify(e.shape)}`);
    const offsets = e.data_offsets;
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1] || offsets[1] > dataLength) {
      throw new SafetensorsError(`tensor ${name}: data_offsets ${JSON.stringify(offsets)} are outside the ${dataLength} data bytes`);
    }
    const dtype = e.dtype as SafeDtype;
    const shape = e.shape as number[];
    const [begin, end] = offsets as [number, number];
    checkTensor(name, dtype, shape, end - begin);
    tensors.set(name, { dtype, shape, bytes: file.subarray(dataStart + begin, dataStart + end) });
  }
  return { tensors, metadata };
}

function checkTensor(name: string, dtype: SafeDtype, shape: readonly number[], byteLength: number): void {
  const expected = shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
  if (expected !== byteLength) throw new SafetensorsError(`tensor ${name}: shape [${shape.join(', ')}] of ${dtype} needs ${expected} bytes, found ${byteLength}`);
}

/** A tensor's values as float32, converting from F16/BF16/F64 (for loading checkpoints saved in other precisions). */
export function toFloat32(name: string, t: SafeTensor): Float32Array {
  const n = t.shape.reduce((a, b) => a * b, 1);
  const view = new DataView(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
  const out = new Float32Array(n);
  switch (t.dtype) {
    case 'F32':
      if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(t.bytes);
      else for (let i = 0; i < n; i++) out[i] = view.getFloat32(i * 4, true);
      return out;
    case 'F64':
      for (let i = 0; i < n; i++) out[i] = view.getFloat64(i * 8, true);
      return out;
    case 'F16':
      for (let i = 0; i < n; i++) out[i] = halfToFloat(view.getUint16(i * 2, true));
      return out;
    case 'BF16': {
      const u32 = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) u32[i] = view.getUint16(i * 2, true) << 16;
      return out;
    }
    default:
      throw new SafetensorsError(`tensor ${name}: dtype ${t.dtype} is not a floating-point type`);
  }
}

/**
 * float32 values as an F32 safetensors tensor: a view of their bytes where the platform is
 * little-endian (every platform Node ships on is; the tensor then changes with the values), else a
 * little-endian copy.
 */
export function float32Tensor(values: Float32Array, shape: readonly number[]): SafeTensor {
  return LITTLE_ENDIAN ? { dtype: 'F32', shape, bytes: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) } : fromFloat32(values, shape);
}

/**
 * float32 values as an F16 tensor (half the bytes), or as F32 (float32Tensor) when one of them lies
 * beyond fp16's range: it would become ±Inf there (non-finite values stay what they are, and are
 * refused on load).
 */
export function fromFloat32AsHalf(values: Float32Array, shape: readonly number[]): SafeTensor {
  for (let i = 0; i < values.length; i++) if (Math.abs(values[i]!) > HALF_MAX) return float32Tensor(values, shape);
  const bytes = new Uint8Array(values.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, floatToHalf(values[i]!), true);
  return { dtype: 'F16', shape, bytes };
}

/** float32 values as an F32 safetensors tensor (copies into little-endian bytes). */
export function fromFloat32(values: Float32Array, shape: readonly number[]): SafeTensor {
  const bytes = new Uint8Array(values.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true);
  return { dtype: 'F32', shape, bytes };
}
