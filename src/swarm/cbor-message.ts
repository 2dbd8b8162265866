import { decode as cborDecode, encode as cborEncode } from 'cborg';
import type { z } from 'zod';

export function encodeCbor(message: unknown): Uint8Array {
  return cborEncode(message);
}

/**
 * Decodes a CBOR message from a peer and checks it against `schema`. Failures are reported through
 * `fail(message, cause)` so each protocol throws its own error class; the message names `what`, the
 * path of the first bad field and the problem.
 */
export function decodeCbor<T>(schema: z.ZodType<T>, bytes: Uint8Array, what: string, fail: (message: string, cause?: unknown) => Error): T {
  let raw: unknown;
  try {
    raw = cborDecode(bytes);
  } catch (err) {
    throw fail(`${what} is not valid CBOR (${(err as Error).message})`, err);
  }
  return checkMessage(schema, raw, what, fail);
}

/** Checks a decoded message against `schema` (decodeCbor's check, for messages with a binary encoding of their own). */
export function checkMessage<T>(schema: z.ZodType<T>, raw: unknown, what: string, fail: (message: string, cause?: unknown) => Error): T {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw fail(`${what} is malformed: ${issue ? `${issue.path.join('.') || 'message'}: ${issue.message}` : 'schema mismatch'}`);
  }
  return parsed.data;
}
