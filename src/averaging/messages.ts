import { checkMessage, decodeCbor, encodeCbor } from '../swarm/cbor-message.js';
import { z } from 'zod';
import { COMPRESSIONS } from './compression.js';
import { ALLREDUCE_REFUSALS, JOIN_REFUSALS, ProtocolError, STATE_REFUSALS } from './errors.js';
import { MAX_CHUNK_VALUES, MAX_GROUP_SIZE, MAX_STATE_CHUNK_BYTES, MAX_VECTOR_VALUES } from './constants.js';

/**
 * Every message of the averaging protocols, defined once: CBOR maps validated with these schemas on
 * receipt, each in a varint-length-prefixed frame (framing.ts), except all-reduce chunks, which have
 * a binary encoding (CHUNK_FRAME_TAG below) and are validated with the same schema once decoded.
 * Types are derived from the schemas. See docs/protocol.md for the exchanges.
 */

const bytes = () => z.custom<Uint8Array>((x) => x instanceof Uint8Array, 'expected a byte string');
const peerId = z.string().min(1).max(128);
const count = z.number().int().nonnegative();
/** Samples contributed (hivemind's weight). */
const weight = z.number().finite().nonnegative().max(1e15);
/** Declared throughput, bytes/s. */
const bandwidth = z.number().finite().nonnegative().max(1e12);
const groupKey = z.string().min(1).max(256);
/** Hex SHA-256 of the tensor schema: peers averaging different shapes must never meet. */
const schemaHash = z.string().regex(/^[0-9a-f]{64}$/);
const reason = z.string().max(1000);
const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/);

/**
 * What a peer trains on: its dataset's content id and its tokenizer.json's sha256. Peers whose data
 * differs never average: their gradients mean different token ids. null: no pinned data.
 */
export const dataPinsSchema = z.strictObject({ datasetId: sha256Hex, tokenizerSha256: sha256Hex });
export type DataPins = z.infer<typeof dataPinsSchema>;

// ---- records ----------------------------------------------------------------------------------

/** Value of a group declaration under `averaging/<prefix>:<epoch>` (subkey '' of its owner); no weight while pre-scheduled. */
export const declarationSchema = z.strictObject({ weight: weight.optional(), bandwidth, clientMode: z.boolean(), schema: schemaHash, data: dataPinsSchema.nullable() });
export type Declaration = z.infer<typeof declarationSchema>;

/**
 * Value of a donor advertisement under `state/<prefix>`: `sha256` (hex) of the bytes it serves at
 * `epoch`, so newcomers download only a state that another peer advertises too.
 */
export const stateAdvertSchema = z.strictObject({ epoch: count, canServe: z.boolean(), sha256: sha256Hex.optional() });
export type StateAdvert = z.infer<typeof stateAdvertSchema>;

// ---- matchmaking/5.0.0 ------------------------------------------------------------------------

const memberSchema = z.strictObject({ peer: peerId, weight, bandwidth, clientMode: z.boolean() });
export type Member = z.infer<typeof memberSchema>;

/** What the leader sends every follower once the group is closed. */
const groupSchema = z.strictObject({
  id: z.string().regex(/^[0-9a-f]{32}$/),
  key: groupKey,
  schema: schemaHash,
  compression: z.enum(COMPRESSIONS),
  size: z.number().int().nonnegative().max(MAX_VECTOR_VALUES),
  chunkValues: z.number().int().positive().max(MAX_CHUNK_VALUES),
  members: z.array(memberSchema).min(1).max(MAX_GROUP_SIZE),
});
export type GroupWire = z.infer<typeof groupSchema>;

/** `weight` absent: a pre-scheduled member, which sends it in a Ready once its caller has it. */
export const joinRequestSchema = z.strictObject({ t: z.literal('join'), key: groupKey, schema: schemaHash, data: dataPinsSchema.nullable(), weight: weight.optional(), bandwidth, clientMode: z.boolean() });
export type JoinRequest = z.infer<typeof joinRequestSchema>;

/** A pre-scheduled follower's weight, sent after `accepted`: the leader sends the group description once every member is ready. */
export const readySchema = z.strictObject({ t: z.literal('ready'), weight });
export type Ready = z.infer<typeof readySchema>;

export const joinResponseSchema = z.discriminatedUnion('t', [
  /** Accepted; the group description follows when the leader closes the group. */
  z.strictObject({ t: z.literal('accepted') }),
  z.strictObject({ t: z.literal('group'), group: groupSchema }),
  /** `leader`: whom the refusing peer follows, a hint for NOT_A_LEADER. */
  z.strictObject({ t: z.literal('refused'), code: z.enum(JOIN_REFUSALS), message: reason, leader: peerId.optional() }),
]);
export type JoinResponse = z.infer<typeof joinResponseSchema>;

// ---- allreduce/3.0.0 --------------------------------------------------------------------------

/** First message of a sender's stream to a reducer; `part` is the reducer's index in the group. */
export const beginSchema = z.strictObject({ t: z.literal('begin'), group: z.string().regex(/^[0-9a-f]{32}$/), part: z.number().int().nonnegative().max(MAX_GROUP_SIZE), weight });
export type Begin = z.infer<typeof beginSchema>;

/** A chunk of the sender's part (sender → reducer) or of the average (reducer → sender), encoded with the group's compression. */
export const chunkSchema = z.strictObject({ t: z.literal('chunk'), i: z.number().int().nonnegative(), d: bytes() });
export type Chunk = z.infer<typeof chunkSchema>;

const allreduceRefusedSchema = z.strictObject({ t: z.literal('refused'), code: z.enum(ALLREDUCE_REFUSALS), message: reason });
export const reducerMessageSchema = z.discriminatedUnion('t', [chunkSchema, allreduceRefusedSchema]);

// ---- state/2.0.0 ------------------------------------------------------------------------------

export const stateRequestSchema = z.strictObject({ t: z.literal('get'), prefix: z.string().min(1).max(64) });
export type StateRequest = z.infer<typeof stateRequestSchema>;

const metadataValue = z.union([z.string().max(4096), z.number(), z.boolean()]);
const stateMetadataSchema = z.record(z.string().max(128), metadataValue);
export type StateMetadata = z.infer<typeof stateMetadataSchema>;

export const stateHeaderSchema = z.discriminatedUnion('t', [
  z.strictObject({ t: z.literal('header'), epoch: count, size: count, sha256: bytes(), chunkBytes: z.number().int().positive().max(MAX_STATE_CHUNK_BYTES), metadata: stateMetadataSchema }),
  z.strictObject({ t: z.literal('refused'), code: z.enum(STATE_REFUSALS), message: reason }),
]);
export type StateHeader = z.infer<typeof stateHeaderSchema>;

export const stateDataSchema = z.strictObject({ t: z.literal('data'), d: bytes() });

// ---- codec ------------------------------------------------------------------------------------

export const encodeMessage = encodeCbor;

/**
 * First byte of a binary chunk frame: `0x01 | chunk index (u32, big-endian) | payload`. A CBOR map
 * never starts with it (major type 5 is 0xa0–0xbf), so one stream carries both. The payload goes on
 * the wire as it is: no CBOR encoding, no copy of a 512 KiB chunk into a message buffer.
 */
export const CHUNK_FRAME_TAG = 0x01;
export const CHUNK_HEADER_BYTES = 5;

/** The header of a binary chunk frame (see CHUNK_FRAME_TAG). */
export function chunkHeader(i: number): Uint8Array {
  if (!Number.isInteger(i) || i < 0 || i > 0xffffffff) throw new RangeError(`chunk index must be a 32-bit unsigned integer, got ${i}`);
  const header = new Uint8Array(CHUNK_HEADER_BYTES);
  header[0] = CHUNK_FRAME_TAG;
  new DataView(header.buffer).setUint32(1, i);
  return header;
}

/** Decodes a message (CBOR, or a binary chunk frame) and checks it against `schema`; throws ProtocolError naming `what` and the problem. */
export function decodeMessage<T>(schema: z.ZodType<T>, bytes: Uint8Array, what: string): T {
  const fail = (message: string, cause?: unknown): ProtocolError => new ProtocolError(message, cause === undefined ? undefined : { cause });
  if (bytes[0] !== CHUNK_FRAME_TAG) return decodeCbor(schema, bytes, what, fail);
  if (bytes.byteLength < CHUNK_HEADER_BYTES) throw fail(`${what} is malformed: a chunk frame of ${bytes.byteLength} bytes is shorter than its ${CHUNK_HEADER_BYTES}-byte header`);
  const i = new DataView(bytes.buffer, bytes.byteOffset, CHUNK_HEADER_BYTES).getUint32(1);
  return checkMessage(schema, { t: 'chunk', i, d: bytes.subarray(CHUNK_HEADER_BYTES) }, what, fail);
}
