import { randomBytes } from 'node:crypto';
import { preSharedKey } from '@libp2p/pnet';

/**
 * Closed swarms: a 32-byte pre-shared key, encrypting every connection (libp2p private network),
 * so peers without the key cannot even complete a handshake. It travels inside the join code.
 */
export function generatePsk(): Uint8Array {
  return new Uint8Array(randomBytes(32));
}

/** The connection protector for `psk`, in the key-file format @libp2p/pnet reads. */
export function pskProtector(psk: Uint8Array): ReturnType<typeof preSharedKey> {
  const file = `/key/swarm/psk/1.0.0/\n/base16/\n${Buffer.from(psk).toString('hex')}`;
  return preSharedKey({ psk: new TextEncoder().encode(file) });
}

/** Parses a PSK given as 64 hex characters (the `--psk` flag and config). */
export function parsePskHex(text: string): Uint8Array {
  const hex = text.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new RangeError(`pre-shared key must be 64 hex characters (32 bytes); got ${hex.length} characters`);
  return new Uint8Array(Buffer.from(hex, 'hex'));
}
