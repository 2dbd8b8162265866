import { SLOW_READER_REFUSED_MS } from './constants.js';

/**
 * A server's transfer slots: at most `max` at once, at most `perPeer` of them to one peer, and none for
 * a while to a peer whose transfer was ended for reading too slowly. A shard holder sets no per-peer
 * cap: a fetcher runs all its parallel transfers at its only holder, and counts a holder that refuses
 * BUSY as failed for the shard, so a cap below its parallelism fails an honest newcomer's fetch. A
 * state donor serves one download per peer: a newcomer loads one state at a time.
 */
export class ServingSlots {
  private readonly slow = new Map<string, number>();
  /** Slots each peer holds. */
  private readonly held = new Map<string, number>();
  active = 0;

  constructor(
    readonly max: number,
    readonly perPeer = max,
  ) {}

  /** Takes a slot for `peer`, or says why it gets none (the message of a BUSY refusal). */
  take(peer: string): string | undefined {
    const until = this.slow.get(peer);
    if (until !== undefined && Date.now() < until) return `a transfer to you was ended for reading too slowly; refused for ${Math.ceil((until - Date.now()) / 1000)} s more`;
    this.slow.delete(peer);
    const mine = this.held.get(peer) ?? 0;
    if (mine >= this.perPeer) return `serving ${mine} transfer(s) to you already (limit ${this.perPeer} per peer)`;
    if (this.active >= this.max) return `serving ${this.active} transfers already (limit ${this.max})`;
    this.active++;
    this.held.set(peer, mine + 1);
    return undefined;
  }

  /** Gives back a slot `peer` took. */
  release(peer: string): void {
    this.active--;
    const mine = this.held.get(peer)! - 1;
    if (mine > 0) this.held.set(peer, mine);
    else this.held.delete(peer);
  }

  /** Refuses `peer` for SLOW_READER_REFUSED_MS. */
  tooSlow(peer: string): void {
    this.slow.set(peer, Date.now() + SLOW_READER_REFUSED_MS);
    // entries of peers that never came back are dropped as others are added
    for (const [p, until] of this.slow) if (until <= Date.now()) this.slow.delete(p);
  }
}
