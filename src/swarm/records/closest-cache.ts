import type { PeerId } from '@libp2p/interface';

/**
 * The closest DHT servers of the keys this peer stored or read lately, so that a peer reading its
 * progress key every refresh period, or its averaging keys every epoch, walks the DHT once per
 * `ttlMs` per key instead of before every request. Entries live `ttlMs` from the lookup that found
 * them (using one does not extend it: a server that became closest since is found by the next
 * lookup); at most `maxEntries` keys, the oldest lookup dropped first.
 */
export class ClosestServersCache {
  private readonly entries = new Map<string, { readonly servers: readonly PeerId[]; readonly foundAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number,
  ) {
    if (!(ttlMs > 0) || !Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError(`closest-servers cache: ttl ${ttlMs} ms must be positive and max entries ${maxEntries} a positive integer`);
  }

  /** The `count` servers nearest to `key`, nearest first, when a lookup of at least that many found them within the TTL. */
  get(key: string, count: number): PeerId[] | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (this.now() - entry.foundAt >= this.ttlMs) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.servers.length >= count ? entry.servers.slice(0, count) : undefined;
  }

  /** Keeps a lookup's answer (nearest first), replacing the key's earlier one. */
  set(key: string, servers: readonly PeerId[]): void {
    // Map order is insertion order, and an entry is only ever inserted by a lookup: the first is the oldest.
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { servers: [...servers], foundAt: this.now() });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
