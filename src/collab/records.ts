/**
 * The signed progress record every training peer publishes under the run's progress key (hivemind's
 * `{run_id}_progress`): what the swarm's progress estimate, the coordinator's metrics and the
 * contribution accounting are built from. One entry per peer (the signer owns its subkey).
 */
import { z } from 'zod';
import type { RecordEntry, RecordNamespace, SwarmNode } from '../swarm/index.js';
import { CLOCK_SKEW_MS } from '../swarm/constants.js';
import { PROGRESS_LIMITS, reportTimeIsCurrent } from './progress.js';

export const PROGRESS_NAMESPACE = 'progress';
/** The key inside the namespace (the run is already the swarm's own DHT). */
export const PROGRESS_KEY = 'progress';

const count = z.number().finite().nonnegative();
const bounded = (max: number) => count.max(max);

/** What a peer reports about the optimizer step it just took (the coordinator's per-epoch evidence). */
const lastStepSchema = z.object({
  /** The epoch this step finished (the swarm epoch before the step). */
  epoch: z.number().int().nonnegative(),
  /** Samples this peer claims it accumulated for the step. */
  samples: bounded(PROGRESS_LIMITS.samples),
  /** Mean local loss over those samples (a cross-entropy: never negative, and far below the bound). */
  loss: z.number().min(0).max(PROGRESS_LIMITS.loss),
  /** Sample weights each member sent into the gradient all-reduce (peer id → weight); absent after a local step. */
  weights: z.record(z.string().max(64), bounded(PROGRESS_LIMITS.samples)).optional(),
});

const progressRecordSchema = z.object({
  epoch: z.number().int().nonnegative(),
  /** Samples accumulated since this peer's current epoch began. */
  samples: bounded(PROGRESS_LIMITS.samples),
  samplesPerSecond: bounded(PROGRESS_LIMITS.samplesPerSecond),
  /** When measured (ms since the Unix epoch); readers ignore a record whose time is not current (`currentProgress`). */
  time: count,
  clientMode: z.boolean(),
  /** Cumulative samples and seconds of compute this peer has put into the run. */
  totalSamples: bounded(PROGRESS_LIMITS.totalSamples),
  computeSeconds: bounded(PROGRESS_LIMITS.computeSeconds),
  displayName: z.string().max(64).optional(),
  lastStep: lastStepSchema.optional(),
  /** The peer stopped training (its last record): it adds no samples, throughput or peer, and training peers ignore it (docs/collab.md). */
  left: z.literal(true).optional(),
});

export type ProgressRecord = z.infer<typeof progressRecordSchema>;
export type LastStep = z.infer<typeof lastStepSchema>;

const progressByNode = new WeakMap<SwarmNode, RecordNamespace<ProgressRecord>>();
const leaderboardByNode = new WeakMap<SwarmNode, RecordNamespace<LeaderboardRecord>>();

/** The progress namespace of a node, registered once (a peer and a coordinator may share the node). */
export function progressRecords(node: SwarmNode): RecordNamespace<ProgressRecord> {
  return once(progressByNode, node, () => node.registerNamespace(PROGRESS_NAMESPACE, progressRecordSchema, { maxValueBytes: 8192 }));
}

/**
 * The progress entries to count: each owner's own entry (subkey ''; a peer publishes exactly that
 * one, so an identity cannot count as 16 peers by filling subkeys), measured within the clock skew
 * of `now` and no older than PROGRESS_LIMITS.maxAgeMs (a record stamped in the future would be
 * extrapolated for ever).
 */
export function currentProgress(entries: ReadonlyMap<string, RecordEntry<ProgressRecord>>, now: number): Array<RecordEntry<ProgressRecord>> {
  return [...entries.values()].filter((e) => e.subkey === '' && reportTimeIsCurrent(e.value.time, now));
}

/** The value `cache` holds for `node`, made on first use (a namespace is registered once per node). */
export function once<T>(cache: WeakMap<SwarmNode, T>, node: SwarmNode, make: () => T): T {
  let value = cache.get(node);
  if (value === undefined) cache.set(node, (value = make()));
  return value;
}

export const LEADERBOARD_NAMESPACE = 'leaderboard';

/** The credited contributions a coordinator publishes (its view; several coordinators each publish theirs). */
export const leaderboardRecordSchema = z.object({
  time: count,
  rows: z
    .array(z.object({ name: z.string().max(64), samples: count, computeHours: count.optional(), share: z.number().min(0).max(1), rank: z.number().int().positive() }))
    .max(20),
  flagged: z.number().int().nonnegative(),
});
export type LeaderboardRecord = z.infer<typeof leaderboardRecordSchema>;

export function leaderboardRecords(node: SwarmNode): RecordNamespace<LeaderboardRecord> {
  return once(leaderboardByNode, node, () => node.registerNamespace(LEADERBOARD_NAMESPACE, leaderboardRecordSchema, { maxValueBytes: 4096 }));
}

/**
 * The leaderboard `cohort status` prints and the dashboard shows, or undefined when none is found: the
 * newest one a `trusted` peer (the join code's: the run's coordinator) published when there is one, else
 * the newest of any coordinator. Any peer can publish a board, so a board stamped past the tolerated
 * clock skew is left out: with `time` 10³⁰⁰ it would stay the newest for ever.
 */
export async function latestLeaderboard(node: SwarmNode, trusted: readonly string[] = []): Promise<LeaderboardRecord | undefined> {
  const now = Date.now();
  const boards = [...(await leaderboardRecords(node).get(LEADERBOARD_NAMESPACE)).values()].filter((b) => b.value.time <= now + CLOCK_SKEW_MS);
  const fromTrusted = boards.filter((b) => trusted.includes(b.owner));
  return (fromTrusted.length > 0 ? fromTrusted : boards).sort((a, b) => b.value.time - a.value.time)[0]?.value;
}
