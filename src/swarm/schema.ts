import { z } from 'zod';

/** A CBOR byte string (cborg decodes them to Uint8Array). */
export function bytes(): z.ZodType<Uint8Array> {
  return z.custom<Uint8Array>((x) => x instanceof Uint8Array, 'expected a byte string');
}
