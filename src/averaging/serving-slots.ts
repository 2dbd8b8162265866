import { SLOW_READER_REFUSED_MS } from './constants.js';
import { minRateDeadline, type FramedStream, type MinRateDeadline } from './framing.js';

/** Why a peer gets no slot: `BUSY` (every slot taken, or this peer refused a while) or `PEER_BUSY` (it has its share already). */
export interface SlotRefusal {
  readonly code: 'BUSY' | 'PEER_BUSY';
  readonly message: string;
}

/**
 * A server's transfer slots (a shard holder's transfers, a state donor's downloads): at most `max` at
 * once, at most `perPeer` of them to one peer (one peer opening several streams does not take them
 * all), and none for a while to a peer whose transfer was ended for reading too slowly. A peer at its
 * share is told so apart (`PEER_BUSY`): a shard fetcher waits for one of its own transfers to end
 * rather than count this holder as failed, which would fail a newcomer whose only holder this is.
 */
export class ServingSlots {
  private readonly byPeer = new Map<string, number>();
  private readonly slow = new Map<string, number>();
  private active = 0;

  constructor(
    readonly max: number,
    readonly perPeer: number,
  ) {}

  /** Takes a slot for `peer`, or says why it gets none (a BUSY or PEER_BUSY refusal). */
  take(peer: string): SlotRefusal | undefined {
    const until = this.slow.get(peer);
    if (until !== undefined && Date.now() < until) return { code: 'BUSY', message: `a transfer to you was ended for reading too slowly; refused for ${Math.ceil((until - Date.now()) / 1000)} s more` };
    this.slow.delete(peer);
    const mine = this.byPeer.get(peer) ?? 0;
    if (mine >= this.perPeer) return { code: 'PEER_BUSY', message: `serving ${mine} transfer(s) to you already (limit ${this.perPeer} per peer)` };
    if (this.active >= this.max) return { code: 'BUSY', message: `serving ${this.active} transfers already (limit ${this.max})` };
    this.active++;
    this.byPeer.set(peer, mine + 1);
    return undefined;
  }

  release(peer: string): void {
    this.active--;
    const mine = (this.byPeer.get(peer) ?? 1) - 1;
    if (mine > 0) this.byPeer.set(peer, mine);
    else this.byPeer.delete(peer);
  }

  /**
   * The rate floor under `peer` reading `bytes` from `reader` (minRateDeadline): a reader under it
   * keeps this server (`role`: holder, donor) waiting, so it is refused for SLOW_READER_REFUSED_MS and
   * its transfer ends with `fail(why)`; `taken` says how many bytes it took, `what` what they were of.
   */
  readerFloor(
    peer: string,
    floor: { readonly reader: FramedStream; readonly stallMs: number; readonly bytes: number; readonly minBytesPerSecond: number },
    described: { readonly role: string; readonly what: string; readonly taken: () => number },
    fail: (why: string) => Error,
  ): MinRateDeadline {
    return minRateDeadline(floor, (allowedMs) => {
      this.tooSlow(peer);
      return fail(`${peer} took ${described.taken()} of ${floor.bytes} bytes${described.what} keeping this ${described.role} waiting over ${(allowedMs / 1000).toFixed(0)} s, under the ${floor.minBytesPerSecond} bytes/s a reader must keep; refused for ${SLOW_READER_REFUSED_MS / 1000} s`);
    });
  }

  /** Refuses `peer` for SLOW_READER_REFUSED_MS. */
  private tooSlow(peer: string): void {
    this.slow.set(peer, Date.now() + SLOW_READER_REFUSED_MS);
    // entries of peers that never came back are dropped as others are added
    for (const [p, until] of this.slow) if (until <= Date.now()) this.slow.delete(p);
  }
}
