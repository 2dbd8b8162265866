/**
 * Pieces of bytes joined into one Uint8Array with a buffer of its own (offset 0, never Node's shared
 * pool, unlike Buffer.concat), so callers may view `.buffer` whole or transfer it.
 */
export function concatBytes(pieces: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
