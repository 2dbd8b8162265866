/**
 * Which progress reports a training peer follows: a report of an epoch nobody can hand
 * over is left out. Following it, a peer behind would retry downloading that epoch's state until
 * the report expired (a crashed peer's outlives its state advertisement by minutes) or for ever (a
 * bogus one, epoch 10⁹, republished by a misbehaving peer). See docs/collab.md.
 */
import type { Logger } from '../log/logger.js';
import type { PeerProgress } from './progress.js';

/**
 * Splits off the reports above `floor` (the epochs the caller reaches without downloading a state)
 * and more than one above the newest state any peer advertises (one above is an honest peer that
 * stepped before re-advertising).
 */
export function backedReports<R extends Pick<PeerProgress, 'epoch'>>(reports: readonly R[], floor: number, advertised: number | undefined): { kept: R[]; setAside: R[] } {
  const limit = Math.max(floor, advertised === undefined ? -Infinity : advertised + 1);
  return { kept: reports.filter((r) => r.epoch <= limit), setAside: reports.filter((r) => r.epoch > limit) };
}

/** Filters reports with `backedReports`, looking the advertised states up only when a report is beyond `floor`. */
export class FollowableReports {
  /** How many reports the last `filter` left out. */
  leftOut = 0;
  /** The highest epoch left out so far (warned once per value). */
  private warnedEpoch = -1;

  constructor(
    private readonly advertisedEpoch: () => Promise<number | undefined>,
    private readonly log: Pick<Logger, 'warn'>,
  ) {}

  /** The reports to follow; if the lookup fails, all of them (as before this filter existed). */
  async filter<R extends Pick<PeerProgress, 'peerId' | 'epoch'>>(reports: R[], floor: number): Promise<R[]> {
    this.leftOut = 0;
    if (!reports.some((r) => r.epoch > floor)) return reports;
    let advertised: number | undefined;
    try {
      advertised = await this.advertisedEpoch();
    } catch (err) {
      this.log.warn(`could not look up the states peers advertise: ${(err as Error).message}; following every progress report`);
      return reports;
    }
    const { kept, setAside } = backedReports(reports, floor, advertised);
    this.leftOut = setAside.length;
    const top = Math.max(...setAside.map((r) => r.epoch));
    if (setAside.length > 0 && top !== this.warnedEpoch) {
      this.warnedEpoch = top;
      const newest = advertised === undefined ? 'no peer advertises a state' : `the newest state advertised is of epoch ${advertised}`;
      this.log.warn(`${setAside.length} peer(s) report epochs up to ${top} (${setAside.map((r) => r.peerId).join(', ')}), but ${newest}: leaving their progress out`);
    }
    return kept;
  }
}
