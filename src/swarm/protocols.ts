import { PROTOCOL_VERSION, RUN_ID_PATTERN } from './constants.js';

/**
 * Protocol ids. Everything Cohort speaks is under `/cohort/<run-id>/`, so peers of different runs
 * share no protocol (not even the DHT) and cannot mix records or streams.
 */
function runPrefix(runId: string): string {
  return `/cohort/${checkRunId(runId)}`;
}

export function kadProtocol(runId: string): string {
  return `${runPrefix(runId)}/kad/1.0.0`;
}

export function recordsProtocol(runId: string): string {
  return `${runPrefix(runId)}/records/${PROTOCOL_VERSION}`;
}

/** AutoNAT-style dial-back (src/swarm/reachability/dialback.ts), served by DHT servers. */
export function dialbackProtocol(runId: string): string {
  return `${runPrefix(runId)}/dialback/${PROTOCOL_VERSION}`;
}

/** Protocol suffixes of other layers look like `allreduce/1.0.0`: path segments, then a version. */
const SUFFIX_PATTERN = /^[a-z0-9][a-z0-9._-]*(\/[a-z0-9][a-z0-9._-]*)*\/\d+\.\d+\.\d+$/;
const RESERVED = new Set(['kad', 'records', 'dialback']);

/** `/cohort/<run>/<suffix>` for a protocol of another layer (e.g. `allreduce/1.0.0`). */
export function cohortProtocol(runId: string, suffix: string): string {
  if (!SUFFIX_PATTERN.test(suffix)) {
    throw new RangeError(`protocol suffix "${suffix}" must be path segments ending in a version, e.g. "allreduce/1.0.0"`);
  }
  if (RESERVED.has(suffix.split('/')[0]!)) throw new RangeError(`protocol suffix "${suffix}" is reserved by the swarm layer`);
  return `${runPrefix(runId)}/${suffix}`;
}

export function checkRunId(runId: string): string {
  if (!RUN_ID_PATTERN.test(runId)) {
    throw new RangeError(`run id "${runId}" is invalid: 1–64 characters of a-z, 0-9, ".", "_", "-", starting with a letter or digit`);
  }
  return runId;
}

/**
 * This run's protocols that a peer lists (identify) in another version than this node serves them,
 * e.g. `records/2.0.0` where this node serves `records/1.0.0`: it runs another Cohort release, and
 * the two do not speak these to each other. A peer that also lists this node's version is not one.
 * Given and returned without the run prefix.
 */
export function otherVersions(runId: string, theirs: readonly string[], ours: readonly string[]): Array<{ readonly theirs: string; readonly ours: string }> {
  const prefix = `${runPrefix(runId)}/`;
  const suffixes = (list: readonly string[]): string[] => list.filter((p) => p.startsWith(prefix)).map((p) => p.slice(prefix.length));
  const name = (suffix: string): string => suffix.slice(0, suffix.lastIndexOf('/'));
  const mine = new Map(suffixes(ours).map((s) => [name(s), s]));
  const listed = suffixes(theirs);
  return listed.flatMap((s) => {
    const own = mine.get(name(s));
    return own !== undefined && own !== s && !listed.includes(own) ? [{ theirs: s, ours: own }] : [];
  });
}
