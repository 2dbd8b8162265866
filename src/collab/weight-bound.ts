import type { PeerProgress } from './progress.js';

/** Epochs of progress kept per peer below the newest seen: a round averages the epoch just ended. */
const EPOCHS_KEPT = 2;
/**
 * The allowance for samples a peer made but had not published when this peer last read its record:
 * twice its reported rate over the time since (at most `maxStaleSeconds`, a record's lifetime), plus this share of the target batch (a last micro-batch: 1/16 clamped honest peers
 * of small runs, whose micro-batch of 4 was more than 1/16 of a target of 48).
 */
const ALLOWANCE_TARGET_SHARE = 1 / 8;
/**
 * Headroom over the rate a record reports: it is a moving average, which lags a peer that speeds up
 * (its first epochs warming up, load on its machine easing). At 1× an honest fp16 peer whose rate rose
 * from 10 to 18 samples/s over a run was clamped to 18.75 of its 24 samples (CI, 2026-11-26).
 */
const RATE_SLACK = 2;

interface Seen {
  readonly samples: number;
  readonly samplesPerSecond: number;
  readonly time: number;
}

/**
 * The most gradient weight (samples) each peer may carry in an epoch's round: what this peer has
 * seen it make in that epoch (the most samples its signed progress records showed) plus a small
 * allowance, and never more than twice the target batch. A member declaring more is clamped to it
 * (issue 23: a peer's weight is bounded by the progress it has been seen to make).
 */
export class ObservedProgress {
  /** peer → epoch → the report with the most samples seen at that epoch */
  private readonly seen = new Map<string, Map<number, Seen>>();

  constructor(private readonly opts: { readonly targetBatchSize: number; readonly maxStaleSeconds: number }) {}

  /** Takes the reports of one read of the swarm's progress; forgets epochs more than EPOCHS_KEPT behind the newest. */
  observe(reports: readonly PeerProgress[]): void {
    for (const r of reports) {
      if (r.left === true) continue;
      let epochs = this.seen.get(r.peerId);
      if (epochs === undefined) this.seen.set(r.peerId, (epochs = new Map<number, Seen>()));
      const before = epochs.get(r.epoch);
      if (before === undefined || r.samples >= before.samples) epochs.set(r.epoch, { samples: r.samples, samplesPerSecond: r.samplesPerSecond, time: r.time });
    }
    let newest = 0;
    for (const epochs of this.seen.values()) for (const e of epochs.keys()) newest = Math.max(newest, e);
    for (const [peer, epochs] of this.seen) {
      for (const e of epochs.keys()) if (e < newest - EPOCHS_KEPT) epochs.delete(e);
      if (epochs.size === 0) this.seen.delete(peer);
    }
  }

  /**
   * The most weight `peer` may carry in `epoch`'s round, as of `now` (ms). With no record of that
   * epoch yet (its first record of the epoch not read before the round), the rate comes from its
   * newest earlier one; with none at all (a peer this one has not read yet: a newcomer's first
   * epochs), or none that gives a rate (records of 0 samples/s), there is nothing to judge by, and
   * twice the target batch is the bound. Honest peers whose records lag must not be clamped: the
   * coordinator flags a peer credited less than it claimed.
   */
  bound(peer: string, epoch: number, now: number): number {
    const { targetBatchSize, maxStaleSeconds } = this.opts;
    const epochs = this.seen.get(peer);
    const s = epochs?.get(epoch);
    // a rate of 0 is a peer's first record, before it timed a micro-batch: it says nothing of how
    // fast the peer goes (an honest peer's 8 samples of epoch 0 were clamped to 6 by such a record, CI)
    const rated = s !== undefined && s.samplesPerSecond > 0 ? s : newestBefore(epochs, epoch);
    if (rated === undefined) return 2 * targetBatchSize;
    const unpublished = RATE_SLACK * rated.samplesPerSecond * Math.min(maxStaleSeconds, Math.max(0, (now - rated.time) / 1000));
    return Math.min(2 * targetBatchSize, (s?.samples ?? 0) + unpublished + ALLOWANCE_TARGET_SHARE * targetBatchSize);
  }
}

/** The newest record of an epoch before `epoch` that gives a rate. */
function newestBefore(epochs: ReadonlyMap<number, Seen> | undefined, epoch: number): Seen | undefined {
  let best: number | undefined;
  for (const [e, r] of epochs ?? []) if (e < epoch && r.samplesPerSecond > 0 && (best === undefined || e > best)) best = e;
  return best === undefined ? undefined : epochs!.get(best);
}
