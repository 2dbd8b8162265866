import { encode as cborEncode } from 'cborg';
import { MAX_ANSWER_BYTES, MAX_KEY_TOTAL_BYTES, MAX_OWNER_BYTES, MAX_SOURCE_BYTES, MAX_STORE_TOTAL_BYTES, MAX_SUBKEYS_PER_OWNER } from '../constants.js';
import type { RejectReason } from '../errors.js';
import { entryName, type VerifiedEntry } from './entry.js';

interface Held {
  readonly entry: VerifiedEntry;
  /** The address it was sent from (`self` for this peer's own entries), charged for its bytes. */
  readonly source: string;
}

interface KeyEntries {
  /** In the order the names were first stored: a replaced entry keeps its place. */
  readonly entries: Map<string, Held>;
  bytes: number;
}

export interface TableLimits {
  readonly keyBytes: number;
  readonly storeBytes: number;
  readonly subkeysPerOwner: number;
  readonly ownerBytes: number;
  readonly sourceBytes: number;
}

const DEFAULT_LIMITS: TableLimits = {
  keyBytes: MAX_KEY_TOTAL_BYTES,
  storeBytes: MAX_STORE_TOTAL_BYTES,
  subkeysPerOwner: MAX_SUBKEYS_PER_OWNER,
  ownerBytes: MAX_OWNER_BYTES,
  sourceBytes: MAX_SOURCE_BYTES,
};

/**
 * The records this peer holds (its own and those it replicates for others), in memory. For each
 * (key, owner, subkey) the entry with the later expiration wins; expired entries are evicted by
 * `evictExpired` and never returned. Limits: bytes per key, subkeys per owner per key, bytes per
 * owner and per source address in all keys, bytes in all.
 */
export class RecordTable {
  private readonly keys = new Map<string, KeyEntries>();
  private readonly limits: TableLimits;
  private readonly byOwner = new Map<string, number>();
  private readonly bySource = new Map<string, number>();
  private totalBytes = 0;

  constructor(limits: Partial<TableLimits> = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /** Stores the entry sent from `source` unless an entry as new or newer is held or a limit is reached. */
  put(entry: VerifiedEntry, now: number, source = 'self'): 'stored' | Extract<RejectReason, 'not-newer' | 'key-full' | 'store-full' | 'owner-full' | 'source-full'> {
    const { k, s, e } = entry.wire;
    const slot = this.keys.get(k) ?? { entries: new Map<string, Held>(), bytes: 0 };
    const name = entryName(entry.owner, s);
    const previous = slot.entries.get(name);
    const live = previous !== undefined && previous.entry.wire.e > now ? previous : undefined;
    if (live !== undefined && live.entry.wire.e >= e) return 'not-newer';
    const freed = previous?.entry.size ?? 0;
    if (previous === undefined) {
      let owned = 0;
      for (const other of slot.entries.values()) if (other.entry.owner === entry.owner) owned++;
      if (owned >= this.limits.subkeysPerOwner) return 'key-full';
    }
    if (slot.bytes - freed + entry.size > this.limits.keyBytes) return 'key-full';
    if ((this.byOwner.get(entry.owner) ?? 0) - freed + entry.size > this.limits.ownerBytes) return 'owner-full';
    const sourceFreed = previous?.source === source ? freed : 0;
    if (source !== 'self' && (this.bySource.get(source) ?? 0) - sourceFreed + entry.size > this.limits.sourceBytes) return 'source-full';
    if (this.totalBytes - freed + entry.size > this.limits.storeBytes) return 'store-full';
    if (previous !== undefined) this.release(previous);
    slot.entries.set(name, { entry, source });
    slot.bytes += entry.size - freed;
    this.totalBytes += entry.size;
    add(this.byOwner, entry.owner, entry.size);
    add(this.bySource, source, entry.size);
    this.keys.set(k, slot);
    return 'stored';
  }

  /** Unexpired entries of a key. */
  get(key: string, now: number): VerifiedEntry[] {
    const slot = this.keys.get(key);
    if (slot === undefined) return [];
    return [...slot.entries.values()].map((x) => x.entry).filter((x) => x.wire.e > now);
  }

  /**
   * What a `get` answer carries: unexpired entries of a key, each owner's in turn (its `''` entry
   * first, owners in the order they were first stored), until their CBOR encoding would pass
   * `maxBytes`. A flood of entries under one key, from one identity or many, cannot push the entry
   * of an owner held before it out of the answer, nor make the answer too large to read.
   */
  answer(key: string, now: number, maxBytes = MAX_ANSWER_BYTES): VerifiedEntry[] {
    const perOwner = new Map<string, VerifiedEntry[]>();
    for (const entry of this.get(key, now)) {
      const list = perOwner.get(entry.owner) ?? [];
      if (entry.wire.s === '') list.unshift(entry);
      else list.push(entry);
      perOwner.set(entry.owner, list);
    }
    const out: VerifiedEntry[] = [];
    let bytes = 0;
    const lists = [...perOwner.values()];
    for (let round = 0; lists.some((l) => l.length > round); round++) {
      for (const list of lists) {
        const entry = list[round];
        if (entry === undefined) continue;
        const size = cborEncode(entry.wire).length;
        if (bytes + size > maxBytes) return out;
        bytes += size;
        out.push(entry);
      }
    }
    return out;
  }

  evictExpired(now: number): number {
    let evicted = 0;
    for (const [key, slot] of this.keys) {
      for (const [name, held] of slot.entries) {
        if (held.entry.wire.e > now) continue;
        slot.entries.delete(name);
        slot.bytes -= held.entry.size;
        this.release(held);
        evicted++;
      }
      if (slot.entries.size === 0) this.keys.delete(key);
    }
    return evicted;
  }

  /** Forgets everything held (a node that stopped serving). */
  clear(): void {
    this.keys.clear();
    this.byOwner.clear();
    this.bySource.clear();
    this.totalBytes = 0;
  }

  stats(): { keys: number; entries: number; bytes: number } {
    let entries = 0;
    for (const slot of this.keys.values()) entries += slot.entries.size;
    return { keys: this.keys.size, entries, bytes: this.totalBytes };
  }

  /** Takes a held entry's bytes off the totals it was charged to. */
  private release(held: Held): void {
    this.totalBytes -= held.entry.size;
    add(this.byOwner, held.entry.owner, -held.entry.size);
    add(this.bySource, held.source, -held.entry.size);
  }
}

/** Adds `delta` to a counter, dropping it at zero so the maps hold only owners and sources with entries. */
function add(counts: Map<string, number>, name: string, delta: number): void {
  const n = (counts.get(name) ?? 0) + delta;
  if (n <= 0) counts.delete(name);
  else counts.set(name, n);
}
