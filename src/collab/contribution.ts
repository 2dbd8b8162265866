/**
 * Contribution accounting. A peer claims samples in its progress records; the claim is checked
 * against what the swarm can observe — its measured throughput over the time it was seen, and the
 * sample weights it actually averaged with — so an inflated claim is capped and flagged.
 */
export interface ContributionEvidence {
  readonly peerId: string;
  readonly displayName?: string;
  /** Samples the peer says it processed in this epoch. */
  readonly claimedSamples: number;
  /** Throughput measured by others (e.g. from its successive progress reports), samples/s. */
  readonly measuredSamplesPerSecond: number;
  /** Seconds the peer was seen working during the epoch. */
  readonly activeSeconds: number;
  /** Sample weight the peer averaged with in the all-reduce, if it took part. */
  readonly averagedWeight?: number;
}

export interface CreditedContribution {
  readonly peerId: string;
  readonly displayName?: string;
  readonly credited: number;
  readonly claimed: number;
  /** Why the claim was cut, when it was. */
  readonly flag?: string;
}

/** Throughput headroom allowed over the measured rate before a claim counts as inflated. */
export const THROUGHPUT_SLACK = 1.5;

export function creditContribution(e: ContributionEvidence): CreditedContribution {
  const base = { peerId: e.peerId, displayName: e.displayName, claimed: e.claimedSamples };
  if (!(e.claimedSamples >= 0) || !Number.isFinite(e.claimedSamples)) return { ...base, claimed: 0, credited: 0, flag: `claimed ${e.claimedSamples} samples, not a count` };
  const byThroughput = Math.max(0, e.measuredSamplesPerSecond) * Math.max(0, e.activeSeconds) * THROUGHPUT_SLACK;
  const limits: Array<[number, string]> = [[byThroughput, `more than ${THROUGHPUT_SLACK}× its measured ${e.measuredSamplesPerSecond.toFixed(1)} samples/s over ${e.activeSeconds.toFixed(0)} s allows (${Math.floor(byThroughput)})`]];
  if (e.averagedWeight !== undefined) limits.push([e.averagedWeight, `more than the ${e.averagedWeight} samples it averaged with`]);
  const [cap, reason] = limits.reduce((a, b) => (b[0] < a[0] ? b : a));
  if (e.claimedSamples <= cap) return { ...base, credited: e.claimedSamples };
  return { ...base, credited: Math.floor(cap), flag: `claimed ${e.claimedSamples} samples: ${reason}` };
}

export interface LeaderboardRow {
  readonly name: string;
  readonly samples: number;
  /** Compute credited, in hours. */
  readonly computeHours: number;
  readonly share: number;
  readonly rank: number;
}

/** What the leaderboard sums: one credited step, or a peer's totals. */
export interface Credited {
  readonly peerId: string;
  readonly displayName?: string;
  readonly credited: number;
  readonly computeSeconds?: number;
}

/** Totals per volunteer (display name, else peer id), with share of the run and rank (1 = most). */
export function leaderboard(credits: Iterable<Credited>): LeaderboardRow[] {
  const totals = new Map<string, { samples: number; seconds: number }>();
  for (const c of credits) {
    const name = c.displayName || c.peerId;
    const t = totals.get(name) ?? { samples: 0, seconds: 0 };
    totals.set(name, { samples: t.samples + c.credited, seconds: t.seconds + (c.computeSeconds ?? 0) });
  }
  const all = [...totals.values()].reduce((a, t) => a + t.samples, 0);
  return [...totals]
    .sort((a, b) => b[1].samples - a[1].samples || a[0].localeCompare(b[0]))
    .map(([name, t], i) => ({ name, samples: t.samples, computeHours: t.seconds / 3600, share: all > 0 ? t.samples / all : 0, rank: i + 1 }));
}
