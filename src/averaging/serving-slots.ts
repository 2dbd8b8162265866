import { SLOW_READER_REFUSED_MS } from './constants.js';

/**
 * A server's transfer slots (a holder's shard transfers): at most `max` at once, and none for a while
 * to a peer whose transfer was ended for reading too slowly. No per-peer cap: a fetcher runs all its
 * parallel transfers at its only holder, and counts a holder that refuses BUSY as failed for the shard,
 * so a cap below its parallelism fails an honest newcomer's fetch.
 */
export class ServingSlots {
  private readonly slow = new Map<string, number>();
  active = 0;

  constructor(readonly max: number) {}

  /** Takes a slot for `peer`, or says why it gets none (the message of a BUSY refusal). */
  take(peer: string): string | undefined {
    const until = this.slow.get(peer);
    if (until !== undefined && Date.now() < until) return `a transfer to you was ended for reading too slowly; refused for ${Math.ceil((until - Date.now()) / 1000)} s more`;
    this.slow.delete(peer);
    if (this.active >= this.max) return `serving ${this.active} transfers already (limit ${this.max})`;
    this.active++;
    return undefined;
  }

  release(): void {
    this.active--;
  }

  /** Refuses `peer` for SLOW_READER_REFUSED_MS. */
  tooSlow(peer: string): void {
    this.slow.set(peer, Date.now() + SLOW_READER_REFUSED_MS);
    // entries of peers that never came back are dropped as others are added
    for (const [p, until] of this.slow) if (until <= Date.now()) this.slow.delete(p);
  }
}
