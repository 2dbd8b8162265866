import { MAX_KEY_TOTAL_BYTES, MAX_STORE_TOTAL_BYTES, MAX_SUBKEYS_PER_OWNER } from '../constants.js';
import type { RejectReason } from '../errors.js';
import { entryName, type VerifiedEntry } from './entry.js';

interface KeyEntries {
  readonly entries: Map<string, VerifiedEntry>;
  bytes: number;
}

/**
 * The records this peer holds (its own and those it replicates for others), in memory. For each
 * (key, owner, subkey) the entry with the later expiration wins; expired entries are evicted by
 * `evictExpired` and never returned. Limits: bytes per key, subkeys per owner per key, bytes in all.
 */
export class RecordTable {
  private readonly keys = new Map<string, KeyEntries>();
  private totalBytes = 0;

  constructor(private readonly limits = { keyBytes: MAX_KEY_TOTAL_BYTES, storeBytes: MAX_STORE_TOTAL_BYTES, subkeysPerOwner: MAX_SUBKEYS_PER_OWNER }) {}

  /** Stores the entry unless an entry as new or newer is held or a limit is reached. */
  put(entry: VerifiedEntry, now: number): 'stored' | Extract<RejectReason, 'not-newer' | 'key-full' | 'store-full'> {
    const { k, s, e } = entry.wire;
    const slot = this.keys.get(k) ?? { entries: new Map<string, VerifiedEntry>(), bytes: 0 };
    const name = entryName(entry.owner, s);
    const previous = slot.entries.get(name);
    const live = previous !== undefined && previous.wire.e > now ? previous : undefined;
    if (live !== undefined && live.wire.e >= e) return 'not-newer';
    const freed = previous?.size ?? 0;
    if (previous === undefined) {
      let owned = 0;
      for (const other of slot.entries.values()) if (other.owner === entry.owner) owned++;
      if (owned >= this.limits.subkeysPerOwner) return 'key-full';
    }
    if (slot.bytes - freed + entry.size > this.limits.keyBytes) return 'key-full';
    if (this.totalBytes - freed + entry.size > this.limits.storeBytes) return 'store-full';
    slot.entries.set(name, entry);
    slot.bytes += entry.size - freed;
    this.totalBytes += entry.size - freed;
    this.keys.set(k, slot);
    return 'stored';
  }

  /** Unexpired entries of a key. */
  get(key: string, now: number): VerifiedEntry[] {
    const slot = this.keys.get(key);
    if (slot === undefined) return [];
    return [...slot.entries.values()].filter((x) => x.wire.e > now);
  }

  evictExpired(now: number): number {
    let evicted = 0;
    for (const [key, slot] of this.keys) {
      for (const [name, entry] of slot.entries) {
        if (entry.wire.e > now) continue;
        slot.entries.delete(name);
        slot.bytes -= entry.size;
        this.totalBytes -= entry.size;
        evicted++;
      }
      if (slot.entries.size === 0) this.keys.delete(key);
    }
    return evicted;
  }

  /** Forgets everything held (a node that stopped serving). */
  clear(): void {
    this.keys.clear();
    this.totalBytes = 0;
  }

  stats(): { keys: number; entries: number; bytes: number } {
    let entries = 0;
    for (const slot of this.keys.values()) entries += slot.entries.size;
    return { keys: this.keys.size, entries, bytes: this.totalBytes };
  }
}
