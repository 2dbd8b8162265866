/**
 * The run's parameters: the settings every peer of a swarm must agree on (run-settings.ts) and the
 * run's data, published by the swarm's founder in a signed `run` record and adopted by joiners, so a
 * volunteer cannot silently train something incompatible. See docs/protocol.md ("The `run` record")
 * for who is authoritative and the limits of that rule.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { dataPinsSchema, type DataPins } from '../averaging/index.js';
import type { Logger } from '../log/logger.js';
import { decodeJoinCode, soleJoinCode, type RecordEntry, type RecordNamespace, type StoreResult, type SwarmNode } from '../swarm/index.js';
import { parsePeerAddr } from '../swarm/config.js';
import { OTHER_RELEASE_NOTICE } from '../util/notices.js';
import { pick } from '../util/pick.js';
import { RunRecordUnavailableError, RunSettingsConflictError } from './errors.js';
import { once } from './records.js';
import { combinationProblem, RUN_SETTING_FIELDS, runSettingsSchema, type RunSettings } from './run-settings.js';

export const RUN_NAMESPACE = 'run';
/** The key inside the namespace (one per swarm: the run is already the swarm's own DHT). */
export const RUN_KEY = 'run';
/** Lifetime of a published record; each holder re-publishes well before it expires. */
const RUN_PARAMS_TTL_MS = 60 * 60_000;
const RUN_PARAMS_REPUBLISH_MS = 10 * 60_000;
/** How long one look for the record lasts (reads every RETRY_MS). */
const RUN_PARAMS_WAIT_MS = 10_000;
const RETRY_MS = 500;
/**
 * How long a joiner keeps looking before it gives up: a founder still starting, or a swarm whose
 * DHT is slow on a loaded machine, publishes late, and a joiner never trains on other settings.
 */
const RUN_RECORD_JOIN_WAIT_MS = 120_000;
/** Pauses between a joiner's looks: doubling from the first, up to the second. */
const RUN_RECORD_BACKOFF_MS = [2000, 20_000] as const;

/**
 * The data a run trains on: its prepared dataset's content id and the sha256 of the tokenizer.json
 * its token ids come from (store/dataset-id.ts), as matchmaking compares them.
 */
export type RunData = DataPins;

/** The record's version: 2 added the data and LAMB's recipe; peers of one version ignore the other's records. */
const RUN_PARAMS_VERSION = 2;

/** The signed value under the `run` key: version, when the run was founded, its data and its settings. */
export const runParamsSchema = runSettingsSchema
  .extend({
    v: z.literal(RUN_PARAMS_VERSION),
    /** When the founder created the run (ms since the Unix epoch); re-publishers keep it. */
    created: z.number().int().nonnegative(),
    /** null: the founder had no prepared dataset, so each peer trains on its own (warned). */
    data: dataPinsSchema.nullable(),
  })
  .superRefine((p, ctx) => {
    const problem = combinationProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', path: [problem.field], message: problem.message });
  });
export type RunParams = z.infer<typeof runParamsSchema>;

export function newRunParams(settings: RunSettings, data: RunData | null, created = Date.now()): RunParams {
  return runParamsSchema.parse({ ...settings, v: RUN_PARAMS_VERSION, created, data });
}

/** The settings part of a record (what the peer trains with). */
export function runSettingsOf(p: RunParams): RunSettings {
  const { v: _v, created: _created, data: _data, ...settings } = p;
  return settings;
}

/** What peers must share in a record (settings and data), as one comparable string. */
function pinnedOf(p: RunParams): string {
  return JSON.stringify({ ...runSettingsOf(p), data: p.data });
}

/** One line naming a run's data, for logs and `cohort status`. */
export function describeRunData(data: RunData | null): string {
  return data === null ? 'no pinned data (each peer trains on its own)' : `dataset ${data.datasetId}, tokenizer sha256 ${data.tokenizerSha256}`;
}

/** The run settings the collaborative optimizer takes (the rest are the model's and LAMB's: the session's). */
const COLLAB_RUN_KEYS = ['targetBatchSize', 'peakLr', 'warmupSteps', 'totalSteps', 'gradCompression', 'stateAveragingCompression', 'averageStateEvery', 'averageOptStatistics', 'useLocalUpdates', 'batchSizeLead', 'aggregation', 'gradAverager', 'powersgdRank', 'powersgdMinRatio', 'outerOptimizer', 'innerSteps', 'innerBatchSize', 'outerLr', 'outerMomentum', 'outerOverlap', 'seed', 'maxGradNorm'] as const;

/** The optimizer options the settings decide. */
export function collabOptionsOf(s: RunSettings): Pick<RunSettings, (typeof COLLAB_RUN_KEYS)[number]> {
  return pick(s, COLLAB_RUN_KEYS);
}

/** One line for logs and `cohort status`: every setting by its field name in words ("target batch size 4096"), an absent one as "default". */
export function describeRunSettings(s: RunSettings): string {
  return (Object.keys(RUN_SETTING_FIELDS) as (keyof RunSettings)[]).map((k) => `${k.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`)} ${s[k] ?? 'default'}`).join(', ');
}

const namespaces = new WeakMap<SwarmNode, RecordNamespace<RunParams>>();

/** The `run` namespace of a node, registered once (the runtime, a coordinator and status may share the node). */
export function runParamsRecords(node: SwarmNode): RecordNamespace<RunParams> {
  return once(namespaces, node, () => node.registerNamespace(RUN_NAMESPACE, runParamsSchema, { maxValueBytes: 1024 }));
}

/** Until a store reaches somebody (a founder not yet serving, peers not yet found, a store that failed), retry this often, this many times. */
const STORED_NOWHERE_RETRY_MS = 2000;
const STORED_NOWHERE_RETRIES = 15;

interface Republisher {
  params: RunParams;
  timer: NodeJS.Timeout | undefined;
  retries: number;
}
const republishers = new WeakMap<SwarmNode, Republisher>();

/**
 * Signs and stores `params` as this node's entry under the `run` key, and keeps re-publishing it
 * while the node runs: every RUN_PARAMS_REPUBLISH_MS (so the record outlives the founder and reaches
 * servers that joined later), sooner while it was stored nowhere. A second call replaces what the
 * node keeps published.
 */
export async function publishRunParams(node: SwarmNode, params: RunParams, log?: Logger): Promise<StoreResult> {
  const records = runParamsRecords(node);
  let held = republishers.get(node);
  if (held === undefined) republishers.set(node, (held = { params, timer: undefined, retries: 0 }));
  held.params = params;
  held.retries = 0;
  const r = held;
  const schedule = (result: StoreResult | undefined): void => {
    clearTimeout(r.timer);
    // undefined: the store failed (a busy or still-bootstrapping node), which is retried like reaching nobody
    const soon = (result === undefined || result.replicas === 0) && r.retries++ < STORED_NOWHERE_RETRIES;
    r.timer = setTimeout(() => {
      if (node.libp2p.status !== 'started') return void republishers.delete(node);
      records.store(RUN_KEY, '', r.params, Date.now() + RUN_PARAMS_TTL_MS).then(schedule, (err: unknown) => {
        log?.debug({ err: (err as Error).message }, 'could not re-publish the run parameters');
        schedule(undefined);
      });
    }, soon ? STORED_NOWHERE_RETRY_MS : RUN_PARAMS_REPUBLISH_MS);
    r.timer.unref();
  };
  let result: StoreResult;
  try {
    result = await records.store(RUN_KEY, '', params, Date.now() + RUN_PARAMS_TTL_MS);
  } catch (err) {
    schedule(undefined); // the first store failing must not end the re-publishing
    throw err;
  }
  schedule(result);
  return result;
}

/** The swarm's parameters as a joiner adopts them. */
export interface SwarmRunParams {
  readonly params: RunParams;
  /** Peer id that signed the adopted entry. */
  readonly owner: string;
  /** Why this entry: signed by a peer of the join code / initial peers, or the earliest created. */
  readonly rule: 'join-peer' | 'earliest';
  /** Entries whose settings differ from the adopted ones. */
  readonly conflicts: ReadonlyArray<{ readonly owner: string; readonly params: RunParams }>;
}

/**
 * The authoritative entry among those found: one signed by a join peer when there is one (the
 * earliest created among them), else the earliest created; ties go to the smaller owner id so every
 * peer picks the same.
 */
export function chooseRunParams(entries: Iterable<RecordEntry<RunParams>>, joinPeers: readonly string[]): SwarmRunParams | undefined {
  const all = [...entries].sort((a, b) => a.value.created - b.value.created || (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0));
  const fromJoinPeer = all.find((e) => joinPeers.includes(e.owner));
  const chosen = fromJoinPeer ?? all[0];
  if (chosen === undefined) return undefined;
  const same = pinnedOf(chosen.value);
  const conflicts = all.filter((e) => pinnedOf(e.value) !== same).map((e) => ({ owner: e.owner, params: e.value }));
  return { params: chosen.value, owner: chosen.owner, rule: fromJoinPeer ? 'join-peer' : 'earliest', conflicts };
}

/**
 * What a `run` entry this Cohort's schema refuses holds: its version when another (the run was
 * founded by another Cohort release), else the schema's complaint (a value a newer release allows
 * within the same version, such as a compression this one does not know).
 */
function describeUnreadable(value: unknown, detail: string): string {
  const v = typeof value === 'object' && value !== null && 'v' in value ? value.v : undefined;
  return typeof v === 'number' && v !== RUN_PARAMS_VERSION ? `version ${v} (this Cohort reads version ${RUN_PARAMS_VERSION})` : `version ${RUN_PARAMS_VERSION} with ${detail}`;
}

/** Reads a joiner makes before giving up on finding the record, however long they took. */
const MIN_READS = 3;

/**
 * Reads the swarm's `run` record, retrying until an entry signed by a join peer appears (when join
 * peers are given) or any entry appears (when none are), bounded by `waitMs`; at the end, whatever
 * was found decides. Conflicting entries are logged with both owners. Undefined: no record.
 */
export async function readRunParams(
  node: SwarmNode,
  opts: { joinPeers?: readonly string[]; waitMs?: number; log?: Logger; signal?: AbortSignal; /** Gets what each entry this Cohort cannot read holds (describeUnreadable). */ unreadable?: Set<string> } = {},
): Promise<SwarmRunParams | undefined> {
  const joinPeers = opts.joinPeers ?? [];
  const records = runParamsRecords(node);
  const deadline = Date.now() + (opts.waitMs ?? RUN_PARAMS_WAIT_MS);
  let found: SwarmRunParams | undefined;
  for (let attempt = 1; ; attempt++) {
    const unreadable = opts.unreadable;
    found = chooseRunParams((await records.get(RUN_KEY, unreadable ? { unreadable: (value, detail) => unreadable.add(describeUnreadable(value, detail)) } : {})).values(), joinPeers);
    const settled = found !== undefined && (joinPeers.length === 0 || found.rule === 'join-peer');
    // a few reads even when the deadline passed: a busy process (a loaded machine, a blocked event
    // loop) can spend the whole wait inside one read that could not make progress
    if (settled || (attempt >= MIN_READS && Date.now() + RETRY_MS > deadline) || opts.signal?.aborted) break;
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
  if (!found) return undefined;
  for (const c of found.conflicts) {
    opts.log?.warn(`conflicting run parameters: ${c.owner} publishes (${describeRunSettings(runSettingsOf(c.params))}; ${describeRunData(c.params.data)}); adopted those of ${found.owner} (${found.rule === 'join-peer' ? 'a peer of the join code' : 'the earliest created'})`);
  }
  return found;
}

export interface ResolveRunSettings {
  /** This peer's settings: the run's when it founds it (a joiner adopts the swarm's). */
  readonly own: RunSettings;
  /** The data this peer holds (null: none prepared): the run's when it founds it. @default null */
  readonly ownData?: RunData | null;
  /** Peers of the join code or initial peers; undefined: this peer founds the run. */
  readonly joinPeers: readonly string[] | undefined;
  /** How long a joiner looks for the swarm's record before RunRecordUnavailableError. @default RUN_RECORD_JOIN_WAIT_MS */
  readonly recordWaitMs?: number;
  /** Settings the user chose explicitly: one that contradicts the swarm's is a RunSettingsConflictError. */
  readonly explicit?: ReadonlyArray<keyof RunSettings>;
  /**
   * The run's record as this peer's data directory keeps it (`keep`, and its checkpoints: a restart
   * on the same data directory): a founder re-publishes it instead of founding the run anew, and a
   * joiner that finds no record in the swarm uses it instead of its own settings.
   */
  readonly stored?: RunParams | undefined;
  /** Keeps the resolved record (the data directory's settings), so that a restart finds it as `stored`. */
  readonly keep?: (record: RunParams) => void;
  readonly log: Logger;
  readonly signal?: AbortSignal;
}

/**
 * The run's record on `node`, for a founder and a joiner alike. A founder publishes its own (in the
 * background: a lone founder's first DHT lookup only ends at its timeout), or the stored one it
 * resumes. A joiner adopts the swarm's published one and keeps re-publishing it (so the record
 * outlives the founder), or trains with the stored one when the swarm has none; with neither, it
 * looks again for up to `recordWaitMs` and then throws RunRecordUnavailableError: a joiner never
 * trains on settings that are not the run's.
 */
export async function resolveRunParams(node: SwarmNode, r: ResolveRunSettings): Promise<RunParams> {
  const params = await resolve(node, r);
  r.keep?.(params);
  return params;
}

async function resolve(node: SwarmNode, r: ResolveRunSettings): Promise<RunParams> {
  const ownData = r.ownData ?? null;
  if (r.joinPeers === undefined) {
    const params = r.stored ?? newRunParams(r.own, ownData);
    if (r.stored) {
      checkExplicit(r, r.stored, node.peerId.toString());
      r.log.info(`resuming run "${node.runId}" (founded ${new Date(r.stored.created).toISOString()}) with its stored run parameters: ${describeRunSettings(runSettingsOf(r.stored))}; ${describeRunData(r.stored.data)}`);
    } else {
      r.log.info(`founding run "${node.runId}" with run parameters: ${describeRunSettings(r.own)}; ${describeRunData(ownData)}`);
      if (ownData === null) r.log.warn('this run pins no data: every peer trains on the dataset it prepared itself; found the run on a prepared dataset (`cohort run --data-source …`) so that peers share one');
    }
    publishRunParams(node, params, r.log).then(
      (result) => r.log.debug(`run parameters published (${result.replicas} replica(s) so far; re-published while this node runs)`),
      (err: unknown) => r.log.error(`could not publish the run parameters: ${(err as Error).message}`),
    );
    return params;
  }
  const swarm = await awaitRunParams(node, r);
  if (swarm === undefined) {
    // the run's own record, kept by this data directory
    r.log.warn(`no run parameters published in swarm "${node.runId}": continuing with those this data directory keeps (${describeRunSettings(runSettingsOf(r.stored!))}; ${describeRunData(r.stored!.data)})`);
    // published, as an adopted record is: a newcomer joining through this peer (the run's other peers
    // restarted after its founder left) would otherwise find no record and never start
    publishRunParams(node, r.stored!, r.log).catch((err: unknown) => r.log.warn(`could not re-publish the run parameters: ${(err as Error).message}`));
    return r.stored!;
  }
  checkExplicit(r, swarm.params, swarm.owner);
  r.log.info(`adopting the swarm's run parameters (published by ${swarm.owner}): ${describeRunSettings(runSettingsOf(swarm.params))}; ${describeRunData(swarm.params.data)}`);
  publishRunParams(node, swarm.params, r.log).catch((err: unknown) => r.log.warn(`could not re-publish the run parameters: ${(err as Error).message}`));
  return swarm.params;
}

/** Why the run records `unreadable` (describeUnreadable of each) name no run parameters: said by a joiner and by `cohort status`. */
export function describeUnreadableRun(unreadable: Iterable<string>): string {
  return `the swarm publishes a run record this Cohort cannot read (${[...unreadable].join('; ')}): the run was founded by another Cohort release; if this peer's is older, update it (the app updates itself on restart; \`cohort --version\` shows the CLI's)`;
}

/**
 * A joiner's look for the swarm's record: read, and while nothing is found, read again after a
 * doubling pause (logged), for up to `recordWaitMs`. Undefined only when this peer keeps the run's
 * record itself (`stored`, after one look); otherwise a RunRecordUnavailableError saying what was tried.
 */
async function awaitRunParams(node: SwarmNode, r: ResolveRunSettings): Promise<SwarmRunParams | undefined> {
  const started = Date.now();
  const deadline = started + (r.recordWaitMs ?? RUN_RECORD_JOIN_WAIT_MS);
  let pause: number = RUN_RECORD_BACKOFF_MS[0];
  // run records of another release: said once when first seen, and again in the final error
  const unreadable = new Set<string>();
  let told = 0;
  const otherRelease = (): string => describeUnreadableRun(unreadable);
  for (let look = 1; ; look++) {
    const found = await readRunParams(node, { joinPeers: r.joinPeers, waitMs: Math.min(RUN_PARAMS_WAIT_MS, Math.max(0, deadline - Date.now())), log: r.log, unreadable, ...(r.signal ? { signal: r.signal } : {}) });
    if (found !== undefined || r.stored !== undefined) return found;
    if (unreadable.size > told) {
      told = unreadable.size;
      r.log.warn(otherRelease());
      node.notices.first(`run record ${otherRelease()}`, OTHER_RELEASE_NOTICE);
    }
    r.signal?.throwIfAborted();
    const peers = node.libp2p.getPeers().map(String);
    const left = deadline - Date.now();
    if (left <= 0) {
      const joinPeers = r.joinPeers ?? [];
      const reached = joinPeers.filter((p) => peers.includes(p));
      throw new RunRecordUnavailableError(
        `could not read the run record (DHT key "${RUN_KEY}") of swarm "${node.runId}" in ${((Date.now() - started) / 1000).toFixed(0)} s (${look} look(s)): ` +
          `connected to ${peers.length} peer(s)${peers.length > 0 ? ` (${peers.map(shortId).join(', ')})` : ''}, ${reached.length} of the ${joinPeers.length} join peer(s) among them; ` +
          `this peer trains only on the run's settings: ${unreadable.size > 0 ? otherRelease() : "check that the swarm's peers are up and run a compatible Cohort"}, or found a run of your own (without --join or --initial-peers)`,
      );
    }
    const wait = Math.min(pause, left);
    r.log.info(`no run record found yet in swarm "${node.runId}" (DHT key "${RUN_KEY}", ${peers.length} peer(s) connected, look ${look}): looking again in ${(wait / 1000).toFixed(0)} s, for up to ${(left / 1000).toFixed(0)} s more`);
    await delay(wait, undefined, r.signal ? { signal: r.signal } : {}).catch(() => r.signal?.throwIfAborted());
    pause = Math.min(2 * pause, RUN_RECORD_BACKOFF_MS[1]);
  }
}

function shortId(peer: string): string {
  return `…${peer.slice(-8)}`;
}

/** Throws RunSettingsConflictError for the first explicit setting that contradicts `params` (signed by `owner`). */
function checkExplicit(r: ResolveRunSettings, params: RunParams, owner: string): void {
  const theirs = runSettingsOf(params);
  for (const key of r.explicit ?? []) {
    if (r.own[key] !== theirs[key]) throw new RunSettingsConflictError(key, r.own[key], theirs[key], owner);
  }
}

/** Peer ids named by a join code or by `/p2p/<id>` multiaddrs (the peers a joiner trusts first). */
export function joinPeerIds(initialPeers: string | readonly string[]): string[] {
  const list = typeof initialPeers === 'string' ? [initialPeers] : initialPeers;
  const code = soleJoinCode(list);
  const addrs = code !== undefined ? decodeJoinCode(code).bootstrap : list.map((a) => parsePeerAddr(a));
  return [...new Set(addrs.map((a) => a.getComponents().at(-1)!.value!))];
}
