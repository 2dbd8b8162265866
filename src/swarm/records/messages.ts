import { decodeCbor, encodeCbor } from '../cbor-message.js';
import { z } from 'zod';
import { MAX_ENTRIES_PER_REQUEST, MAX_KEY_BYTES } from '../constants.js';

/**
 * Messages of the records protocol `/cohort/<run>/records/1.0.0`: one request and one response per
 * stream, each a varint-length-prefixed CBOR map. Entries are checked one by one (admitEntry), so
 * the schemas here only fix the envelope. See docs/protocol.md.
 */
export const recordsRequestSchema = z.discriminatedUnion('t', [
  /** Hold these entries (replicas of the sender's own or forwarded records). */
  z.strictObject({ t: z.literal('store'), e: z.array(z.unknown()).min(1).max(MAX_ENTRIES_PER_REQUEST) }),
  /** Return every unexpired entry held under this key. */
  z.strictObject({ t: z.literal('get'), k: z.string().min(1).max(MAX_KEY_BYTES) }),
]);
export type RecordsRequest = z.infer<typeof recordsRequestSchema>;

export const recordsResponseSchema = z.discriminatedUnion('t', [
  /** One slot per stored entry, in order: null when stored, else the reject reason. */
  z.strictObject({ t: z.literal('stored'), r: z.array(z.string().nullable()) }),
  z.strictObject({ t: z.literal('found'), e: z.array(z.unknown()) }),
  /** The whole request was refused (rate limit, malformed request). */
  z.strictObject({ t: z.literal('refused'), reason: z.string().max(200) }),
]);
export type RecordsResponse = z.infer<typeof recordsResponseSchema>;

export function encodeMessage(message: RecordsRequest | RecordsResponse): Uint8Array {
  return encodeCbor(message);
}

/** Decodes a CBOR message and checks it against `schema`; throws a TypeError naming what is wrong. */
export function decodeMessage<T>(schema: z.ZodType<T>, bytes: Uint8Array, what: string): T {
  return decodeCbor(schema, bytes, what, (message, cause) => new TypeError(message, cause === undefined ? undefined : { cause }));
}
