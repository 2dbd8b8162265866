import { Uint8ArrayList } from 'uint8arraylist';
import { z } from 'zod';

/** `/cohort/<run>/shards/1.4.0`: the shard exchange (docs/protocol.md, "Shard exchange"). */
export const SHARDS_PROTOCOL = 'shards/1.4.0';
/** DHT namespace: `shards/<dataset id>` holds, per holder, which of the dataset's shards it serves. */
export const SHARDS_NAMESPACE = 'shards';
/**
 * Largest data frame payload (and the servers' default without an upload cap): small enough to
 * interleave streams fairly, large enough that the per-frame work (a read, a deadline, a drain wait)
 * is small beside the bytes' own (1 MiB: about 18 % less CPU per GB than 256 KiB in bench shards).
 */
export const MAX_BLOB_CHUNK_BYTES = 1024 * 1024;
/** Largest frame a fetcher accepts (a manifest of ~30 000 shards, or one data chunk). */
export const MAX_SHARD_FRAME_BYTES = 4 * 1024 * 1024;
/**
 * Largest frame a holder accepts: a request is about 100 bytes, and a stream waiting for one under
 * the fetcher's cap would let a peer park 4 MiB per stream (128 MiB per connection) for STREAM_IDLE_MS.
 */
export const MAX_SHARD_REQUEST_BYTES = 1024;
/** Shards in one dataset: bounds the manifest and the advert's bitfield. */
const MAX_SHARDS = 30_000;
/**
 * A stream carries requests one after another (1.3.0): the holder waits this long for the next one
 * before it closes the stream, and a fetcher reuses a stream idle for at most half of it.
 */
export const STREAM_IDLE_MS = 10_000;
/** Requests one stream may carry: the manifest, the tokenizer and every shard of the largest dataset. */
export const MAX_REQUESTS_PER_STREAM = MAX_SHARDS + 2;
/** Largest blob (a shard or a tokenizer.json) a fetcher accepts. */
export const MAX_BLOB_BYTES = 512 * 1024 * 1024;
/**
 * A manifest's sizes are claims (the dataset id covers each blob's sha256, not its length): a fetcher
 * takes a holder's stated size up to twice the claim or the claim plus this, whichever is larger, so a
 * manifest understating a blob does not get its honest holders refused, and a holder overstating it
 * cannot make the fetcher take much more than the manifest says before the sha256 decides.
 */
const BLOB_SIZE_SLACK_BYTES = 64 * 1024 * 1024;
/** The most bytes a fetcher takes for a blob a manifest claims has `claimed` bytes. */
export function acceptedBlobBytes(claimed: number): number {
  return Math.min(MAX_BLOB_BYTES, Math.max(2 * claimed, claimed + BLOB_SIZE_SLACK_BYTES));
}
/**
 * Transfers a holder serves one peer at once (or half its slots, if that is fewer; PEER_BUSY past it),
 * and a fetcher runs at one holder: one peer cannot take all of a seeder's slots (hivemind #169).
 */
export const MAX_TRANSFERS_PER_PEER = 2;
/** A fetcher leaves a holder that sends nothing for this long (fetchDataset's `stallTimeoutMs`). */
export const DEFAULT_FETCH_STALL_TIMEOUT_MS = 15_000;
/**
 * A fetcher leaves a transfer averaging under this (after a stall timeout's grace) for another holder
 * (fetchDataset's `minBytesPerSecond`): a holder sending a byte every few seconds never stalls.
 */
export const DEFAULT_FETCH_MIN_BYTES_PER_S = 16 * 1024;
/** When no holder is left for a blob, how long a fetcher waits for one to (re)appear (fetchDataset's `waitForHolderMs`). */
export const DEFAULT_WAIT_FOR_HOLDER_MS = 60_000;

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lower-case hex digits');
const count = z.number().int().nonnegative();
const bytes = () => z.custom<Uint8Array>((x) => x instanceof Uint8Array, 'expected a byte string');

const manifestShardSchema = z.strictObject({ sha256: hex64, examples: count, tokens: count, bytes: count.max(MAX_BLOB_BYTES) });
export type ManifestShard = z.infer<typeof manifestShardSchema>;

/** Everything a newcomer needs to hold (part of) a dataset and check it is the one the run names. */
export const manifestSchema = z.strictObject({
  datasetId: hex64,
  maxSeqLen: z.number().int().min(8).max(8192),
  shortSeqProb: z.number().min(0).max(1),
  tokenizerSha256: hex64,
  tokenizerBytes: count.max(MAX_BLOB_BYTES),
  vocabSize: z.number().int().min(6),
  shards: z.array(manifestShardSchema).min(1).max(MAX_SHARDS),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** A request; a stream carries them one after another, each sent once the previous answer is complete. `get`: a blob (shard or tokenizer.json) by sha256, from byte `offset`. */
export const shardRequestSchema = z.discriminatedUnion('t', [
  z.strictObject({ t: z.literal('manifest'), datasetId: hex64 }),
  z.strictObject({ t: z.literal('get'), sha256: hex64, offset: count.max(MAX_BLOB_BYTES) }),
]);
export type ShardRequest = z.infer<typeof shardRequestSchema>;

/** `BUSY`: every slot is taken, or this peer is refused a while (ask another holder); `PEER_BUSY`: this peer has its share of the slots already (ask again once one of its transfers ended). */
const REFUSAL_CODES = ['BUSY', 'PEER_BUSY', 'NOT_FOUND', 'BAD_OFFSET'] as const;
const refusedSchema = z.strictObject({ t: z.literal('refused'), code: z.enum(REFUSAL_CODES), message: z.string().max(512) });

export const manifestReplySchema = z.discriminatedUnion('t', [z.strictObject({ t: z.literal('manifest'), manifest: manifestSchema }), refusedSchema]);
export type ManifestReply = z.infer<typeof manifestReplySchema>;
/** Answer to `get`: the blob's full size, then `data` frames from the requested offset to the end. */
export const blobHeaderSchema = z.discriminatedUnion('t', [z.strictObject({ t: z.literal('blob'), size: count.max(MAX_BLOB_BYTES) }), refusedSchema]);
export type BlobHeader = z.infer<typeof blobHeaderSchema>;
/**
 * A blob's bytes: binary chunk frames (FramedStream.writeChunk: tag, u32 `i`, bytes), numbered from 0
 * in each transfer; the bytes go to the muxer without a CBOR copy, and reach the fetcher as the
 * parts they arrived in (FramedStream.expectChunk).
 */
export const blobDataSchema = z.strictObject({ t: z.literal('chunk'), i: count, d: z.instanceof(Uint8ArrayList, { message: 'expected a chunk frame' }) });

/** A holder's advert under `shards/<dataset id>`: bit i set = it serves the manifest's shard i (and the tokenizer, and the manifest). */
export const holdingSchema = z.strictObject({ shards: count.max(MAX_SHARDS), have: bytes() });
export type Holding = z.infer<typeof holdingSchema>;
export const MAX_HOLDING_BYTES = Math.ceil(MAX_SHARDS / 8) + 64;

export function encodeBits(held: readonly boolean[]): Uint8Array {
  const bits = new Uint8Array(Math.ceil(held.length / 8));
  held.forEach((h, i) => {
    if (h) bits[i >> 3]! |= 1 << (i & 7);
  });
  return bits;
}

export function hasBit(bits: Uint8Array, i: number): boolean {
  return ((bits[i >> 3] ?? 0) & (1 << (i & 7))) !== 0;
}
