import { CLOCK_SKEW_MS, MAX_KEY_BYTES, MAX_SUBKEY_BYTES, MAX_VALUE_BYTES_LIMIT } from '../constants.js';
import type { RejectReason } from '../errors.js';
import { wireEntrySchema, type VerifiedEntry, type VerifiedSignatures } from './entry.js';
import { decodeValue, namespaceOf, namespaceTtlMs, type NamespaceRegistry } from './namespaces.js';

/** `value`: for `schema`, the value the namespace's schema refused (decodeValue). */
export type Admission = { ok: true; entry: VerifiedEntry } | { ok: false; reason: RejectReason; detail: string; value?: unknown };

/**
 * Every entry that arrives from another peer passes here before it is stored or returned:
 * shape, sizes, a namespace of the protocol and its expiration window (with the clock-skew
 * tolerance), signature, and the namespace's schema. `requireNamespace` is true when reading (the
 * reader must understand the value) and false when holding entries for others: a bootstrap peer
 * need not have registered every layer's schemas, but checks every value whose schema it has.
 * Signatures are checked through the node's `signatures`.
 */
export async function admitEntry(runId: string, raw: unknown, registry: NamespaceRegistry, signatures: VerifiedSignatures, now: number, requireNamespace: boolean): Promise<Admission> {
  const parsed = wireEntrySchema.safeParse(raw);
  if (!parsed.success) return { ok: false, reason: 'malformed', detail: parsed.error.issues[0]?.message ?? 'not an entry' };
  const wire = parsed.data;
  if (Buffer.byteLength(wire.k) > MAX_KEY_BYTES || wire.k.length === 0) return { ok: false, reason: 'key-too-long', detail: `key must be 1–${MAX_KEY_BYTES} bytes` };
  if (Buffer.byteLength(wire.s) > MAX_SUBKEY_BYTES) return { ok: false, reason: 'subkey-too-long', detail: `subkey longer than ${MAX_SUBKEY_BYTES} bytes` };
  if (wire.v.length > MAX_VALUE_BYTES_LIMIT) return { ok: false, reason: 'value-too-large', detail: `${wire.v.length} bytes > ${MAX_VALUE_BYTES_LIMIT}` };
  if (wire.e <= now - CLOCK_SKEW_MS) return { ok: false, reason: 'expired', detail: `expired ${now - wire.e} ms ago` };
  const ttl = namespaceTtlMs(wire.k);
  if (ttl === undefined) return { ok: false, reason: 'unknown-namespace', detail: `"${namespaceOf(wire.k)}" is not a record namespace of the protocol` };
  if (wire.e > now + ttl + CLOCK_SKEW_MS) return { ok: false, reason: 'ttl-too-long', detail: `expires in ${wire.e - now} ms; namespace "${namespaceOf(wire.k)}" allows at most ${ttl} ms` };
  const spec = registry.lookup(wire.k);
  if (spec === undefined && requireNamespace) return { ok: false, reason: 'unknown-namespace', detail: `no schema registered for key "${wire.k}"` };
  if (spec !== undefined) {
    const decoded = decodeValue(spec, wire.v);
    if (!decoded.ok) return decoded;
  }
  const entry = await signatures.verify(runId, wire);
  if (entry === null) return { ok: false, reason: 'bad-signature', detail: 'signature does not verify with the included public key for this run' };
  return { ok: true, entry };
}
