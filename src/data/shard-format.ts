import type { SopExample } from './examples.js';

/**
 * Binary layout of one shard (little-endian, 4-byte aligned):
 *   u32 magic "CDS1" | u32 examples | u32 id width (2 or 4) | u32 tokens
 *   u16[2·examples] segment lengths (A, B) | u8[examples] SOP labels, padded to 4 | u16|u32[tokens] ids (A then B per example)
 * Compact (2 bytes per token for vocabularies up to 65536) and readable without parsing JSON.
 */
const MAGIC = 0x31534443; // "CDS1"
const HEADER = 16;

export class ShardFormatError extends Error {
  override readonly name = 'ShardFormatError';
}

/** A decoded shard: views into one buffer; example i's tokens start at `offsets[i]`. */
export interface ShardView {
  readonly examples: number;
  readonly tokens: number;
  readonly lengths: Uint16Array;
  readonly sop: Uint8Array;
  readonly ids: Uint16Array | Uint32Array;
  readonly offsets: Uint32Array;
}

const align4 = (n: number) => (n + 3) & ~3;

export function encodeShard(examples: readonly SopExample[], vocabSize: number): { data: Buffer; tokens: number } {
  const width = vocabSize <= 65536 ? 2 : 4;
  let tokens = 0;
  for (const e of examples) tokens += e.a.length + e.b.length;
  const lenBytes = align4(examples.length * 4);
  const sopBytes = align4(examples.length);
  const buf = new ArrayBuffer(HEADER + lenBytes + sopBytes + tokens * width);
  const header = new DataView(buf, 0, HEADER);
  header.setUint32(0, MAGIC, true);
  header.setUint32(4, examples.length, true);
  header.setUint32(8, width, true);
  header.setUint32(12, tokens, true);
  const lengths = new Uint16Array(buf, HEADER, examples.length * 2);
  const sop = new Uint8Array(buf, HEADER + lenBytes, examples.length);
  const ids = width === 2 ? new Uint16Array(buf, HEADER + lenBytes + sopBytes, tokens) : new Uint32Array(buf, HEADER + lenBytes + sopBytes, tokens);
  let at = 0;
  examples.forEach((e, i) => {
    lengths[2 * i] = e.a.length;
    lengths[2 * i + 1] = e.b.length;
    sop[i] = e.sop;
    ids.set(e.a, at);
    ids.set(e.b, at + e.a.length);
    at += e.a.length + e.b.length;
  });
  return { data: Buffer.from(buf), tokens };
}

/** A shard's header: its example and token counts and its id width; a ShardFormatError if it has none. */
export function shardHeader(data: Uint8Array): { examples: number; width: number; tokens: number } {
  if (data.byteLength < HEADER) throw new ShardFormatError(`shard is ${data.byteLength} bytes, shorter than its header`);
  const header = new DataView(data.buffer, data.byteOffset, HEADER);
  if (header.getUint32(0, true) !== MAGIC) throw new ShardFormatError('shard has no CDS1 header');
  return { examples: header.getUint32(4, true), width: header.getUint32(8, true), tokens: header.getUint32(12, true) };
}

/** Decodes and checks a shard; every inconsistency (size, header, lengths) is a ShardFormatError. */
export function decodeShard(data: Uint8Array, expectExamples: number, expectTokens: number): ShardView {
  // Copy into a fresh aligned buffer: SQLite blobs may sit at any offset.
  const buf = new Uint8Array(data).buffer;
  const { examples, width, tokens } = shardHeader(new Uint8Array(buf));
  if (examples !== expectExamples || tokens !== expectTokens) throw new ShardFormatError(`shard header says ${examples} examples / ${tokens} tokens, the row says ${expectExamples} / ${expectTokens}`);
  if (width !== 2 && width !== 4) throw new ShardFormatError(`shard id width ${width} is neither 2 nor 4`);
  const lenBytes = align4(examples * 4);
  const sopBytes = align4(examples);
  const expected = HEADER + lenBytes + sopBytes + tokens * width;
  if (buf.byteLength !== expected) throw new ShardFormatError(`shard is ${buf.byteLength} bytes, expected ${expected}`);
  const lengths = new Uint16Array(buf, HEADER, examples * 2);
  const sop = new Uint8Array(buf, HEADER + lenBytes, examples);
  const ids = width === 2 ? new Uint16Array(buf, HEADER + lenBytes + sopBytes, tokens) : new Uint32Array(buf, HEADER + lenBytes + sopBytes, tokens);
  const offsets = new Uint32Array(examples + 1);
  for (let i = 0; i < examples; i++) {
    if (sop[i]! > 1) throw new ShardFormatError(`shard example ${i} has SOP label ${sop[i]}`);
    offsets[i + 1] = offsets[i]! + lengths[2 * i]! + lengths[2 * i + 1]!;
  }
  if (offsets[examples] !== tokens) throw new ShardFormatError(`shard segment lengths add up to ${offsets[examples]} tokens, header says ${tokens}`);
  return { examples, tokens, lengths, sop, ids, offsets };
}
