import { createHash } from 'node:crypto';
import { publicKeyFromProtobuf, publicKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey, PublicKey } from '@libp2p/interface';
import { peerIdFromPublicKey } from '@libp2p/peer-id';
import { encode as cborEncode } from 'cborg';
import { z } from 'zod';
import { VERIFIED_SIGNATURES_CACHE_ENTRIES } from '../constants.js';
import { bytes } from '../schema.js';

/**
 * One signed DHT entry as it travels and is stored: (key, subkey) → value until expiration, signed
 * by its owner. The owner's public key travels with it, so any peer can check it; the entry's
 * identity is (owner, subkey), so no peer can write another's subkey. Field names are one letter
 * to keep the CBOR small.
 */
export const wireEntrySchema = z.strictObject({
  /** key, without the run prefix */
  k: z.string(),
  /** subkey chosen by the owner ('' for the owner's single entry under the key) */
  s: z.string(),
  /** value: CBOR bytes validated by the key namespace's schema */
  v: bytes(),
  /** expiration, milliseconds since the Unix epoch */
  e: z.number().int().nonnegative(),
  /** owner's public key, libp2p protobuf encoding */
  p: bytes().refine((p) => p.length <= 128, 'public key too long'),
  /** signature by the owner over signedBytes(run, k, s, v, e) */
  g: bytes().refine((g) => g.length <= 512, 'signature too long'),
});
export type WireEntry = z.infer<typeof wireEntrySchema>;

/** An entry whose signature has been checked; `owner` is the signer's peer id. */
export interface VerifiedEntry {
  readonly wire: WireEntry;
  readonly owner: string;
  /** Bytes this entry takes (value + key material), for the per-key and per-store limits. */
  readonly size: number;
}

const DOMAIN = 'cohort-record/1';

/** What is signed: binds the entry to its run, so a record cannot be replayed into another swarm. */
function signedBytes(runId: string, k: string, s: string, v: Uint8Array, e: number): Uint8Array {
  return cborEncode([DOMAIN, runId, k, s, v, e]);
}

export async function signEntry(key: PrivateKey, runId: string, k: string, s: string, v: Uint8Array, e: number): Promise<WireEntry> {
  const g = await key.sign(signedBytes(runId, k, s, v, e));
  return { k, s, v, e, p: publicKeyToProtobuf(key.publicKey), g };
}

/** Checks the signature over `message` (signedBytes); returns the entry with its owner, or null when it does not verify. */
async function verifySigned(wire: WireEntry, message: Uint8Array): Promise<VerifiedEntry | null> {
  let pub: PublicKey;
  try {
    pub = publicKeyFromProtobuf(wire.p);
  } catch {
    return null;
  }
  let ok: boolean;
  try {
    ok = await pub.verify(message, wire.g);
  } catch {
    return null;
  }
  if (!ok) return null;
  return { wire, owner: peerIdFromPublicKey(pub).toString(), size: entrySize(wire) };
}

/**
 * Checks entries' signatures, remembering the entries that verified (least recently used dropped
 * beyond `capacity`) by the SHA-256 of the public key, signature and signed bytes: the same bytes
 * verify the same way, and an Ed25519 verification through @libp2p/crypto took 380–680 µs against
 * 15–35 µs for the hash (2-core machine, load 5). Only entries that verified are remembered, so bad
 * ones cannot push good ones out. One per node: peers in one process do not share what each checked.
 */
export class VerifiedSignatures {
  private readonly owners = new Map<string, string>();

  constructor(private readonly capacity = VERIFIED_SIGNATURES_CACHE_ENTRIES) {}

  /** The entry with its owner, or null when its signature does not verify for run `runId`. */
  async verify(runId: string, wire: WireEntry): Promise<VerifiedEntry | null> {
    const message = signedBytes(runId, wire.k, wire.s, wire.v, wire.e);
    const id = createHash('sha256').update(cborEncode([wire.p, wire.g, message])).digest('base64');
    const owner = this.owners.get(id);
    if (owner !== undefined) {
      this.owners.delete(id);
      this.owners.set(id, owner);
      return { wire, owner, size: entrySize(wire) };
    }
    const entry = await verifySigned(wire, message);
    if (entry !== null) {
      this.owners.set(id, entry.owner);
      if (this.owners.size > this.capacity) this.owners.delete(this.owners.keys().next().value!);
    }
    return entry;
  }

  get size(): number {
    return this.owners.size;
  }
}

export function entrySize(wire: WireEntry): number {
  return wire.v.length + wire.p.length + wire.g.length + Buffer.byteLength(wire.k) + Buffer.byteLength(wire.s) + 8;
}

/** Name of an entry in the merged dictionary of its key: the owner's peer id, then `/subkey` if any. */
export function entryName(owner: string, subkey: string): string {
  return subkey === '' ? owner : `${owner}/${subkey}`;
}
