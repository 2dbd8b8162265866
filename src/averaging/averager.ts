import { pino } from 'pino';
import type { Logger } from '../log/logger.js';
import type { AveragingMode } from '../shared/api.js';
import type { SwarmNode } from '../swarm/index.js';
import { allreduce, type AllreduceResult } from './allreduce.js';
import { COMPRESSIONS, type Compression } from './compression.js';
import * as C from './constants.js';
import { startCpuMeter } from './cpu-meter.js';
import { MatchmakingError } from './errors.js';
import type { Fault } from './faults.js';
import { AGGREGATIONS, type Aggregation } from './reducer.js';
import { groupKey, phaseGroup, regroup, schemaHash, type GroupInfo } from './group.js';
import { AveragingHub } from './hub.js';
import { Matchmaker, MemberWeight } from './matchmaking.js';
import type { DataPins, Member } from './messages.js';
import { powerSgdSchema, powerSgdWireFraction, type PowerSgd } from './powersgd.js';
import { advertisedStateEpoch, loadStateFromPeers, StateServer, type LoadedState } from './state-download.js';
import type { StateProvider } from './state-provider.js';

/** Everything an averager is made from; every field but `prefix` has a default. */
export interface AveragerInit {
  /** Names what is averaged (`grad`, `state`): part of the group key, so averagers of different prefixes never meet. */
  prefix: string;
  /** Shown in log lines: "Averaged <label> with N peers". @default prefix */
  label?: string;
  /** @default DEFAULT_TARGET_GROUP_SIZE */
  targetGroupSize?: number;
  /** Fewer peers than this: the round fails with a reason. @default DEFAULT_MIN_GROUP_SIZE */
  minGroupSize?: number;
  /** @default DEFAULT_MATCHMAKING_TIME_MS */
  matchmakingTimeMs?: number;
  /** The whole all-reduce. @default DEFAULT_AVERAGING_TIMEOUT_MS */
  averagingTimeoutMs?: number;
  /** Lifetime of a group declaration; at least matchmakingTimeMs. @default DEFAULT_AVERAGING_EXPIRATION_MS */
  averagingExpirationMs?: number;
  /** @default DEFAULT_SENDER_TIMEOUT_MS */
  senderTimeoutMs?: number;
  /** @default DEFAULT_REDUCER_TIMEOUT_MS */
  reducerTimeoutMs?: number;
  /** @default DEFAULT_POLL_INTERVAL_MS */
  pollIntervalMs?: number;
  /** How long a closed group waits for pre-scheduled members to be ready. @default averagingExpirationMs */
  readyTimeoutMs?: number;
  /** Wire compression; a follower refuses a group description with another. @default 'none' */
  compression?: Compression;
  /** Values per streamed chunk; a follower refuses a group description with another. @default DEFAULT_CHUNK_VALUES */
  chunkValues?: number;
  /** This peer's upload bandwidth in bytes/s: parts are sized by it. @default DEFAULT_BANDWIDTH_BYTES_PER_S */
  bandwidthBytesPerS?: number;
  /**
   * Upload cap in bytes/s for this node's averaging traffic (the volunteer's bandwidth setting);
   * shared by every averager of the node, and also the bandwidth this peer declares (parts are sized
   * by it). @default no cap
   */
  uploadLimitBytesPerS?: number;
  /** Values beyond ±maxAbs from a peer exclude it. @default DEFAULT_MAX_ABS_VALUE */
  maxAbs?: number;
  /**
   * How this peer reduces its part: `centered-clip` and `trimmed-mean` bound what one bad sender
   * can do to the average, `mean` is hivemind's weighted mean. @default DEFAULT_AGGREGATION
   */
  aggregation?: Aggregation;
  /**
   * What this peer trains on (its dataset's id and tokenizer's sha256): matchmaking never groups it
   * with peers declaring other data. @default null (no pinned data: groups only with peers without)
   */
  data?: DataPins | null;
  state?: {
    /** @default DEFAULT_MAX_CONCURRENT_DOWNLOADS */
    maxConcurrentDownloads?: number;
    /** @default DEFAULT_STATE_CHUNK_BYTES */
    chunkBytes?: number;
    /** @default DEFAULT_STATE_STALL_TIMEOUT_MS */
    stallTimeoutMs?: number;
    /**
     * The rate a newcomer asks of a donor, and a donor of its reader (bytes/s, a stall timeout's
     * grace on top). @default DEFAULT_STATE_MIN_BYTES_PER_S
     */
    minBytesPerSecond?: number;
    /** @default DEFAULT_MAX_STATE_BYTES */
    maxStateBytes?: number;
    /** @default DEFAULT_STATE_ADVERTISE_INTERVAL_MS */
    advertiseIntervalMs?: number;
    /** @default DEFAULT_MAX_DONORS_TRIED */
    maxDonors?: number;
    /**
     * Peers whose advertised state needs no second backer (the peers of the join code: the run's
     * coordinator). @default none
     */
    trusted?: readonly string[];
  };
  log?: Logger;
  /** Progress and outcomes as they happen (CLI, logs, UI). */
  onEvent?: (event: AveragingEvent) => void;
  /**
   * PowerSGD (hivemind's PowerSGDGradientAverager): every round averages this peer's compressor's
   * P matrices, then its Q matrices with the uncompressed tensors, in two all-reduces with the one
   * matched group; the vector given to `step`/`run` is the gradient laid out as the compressor's
   * layout says, and the result's vector is what to apply. Peers with and without it never meet
   * (part of the schema hash). @default none: the vector is averaged as it is
   */
  powerSgd?: PowerSgd;
  /**
   * The vector is DiLoCo's pseudo-gradient (averaged as it is): each averaged round's log line and
   * 'averaged' event name the mode `diloco`. @default false
   */
  diloco?: boolean;
  /** Fault injection for tests only (hivemind's Fault); never set in production. */
  fault?: Fault;
}

export interface ScheduleOptions {
  /** The swarm epoch: part of the group key, so peers of different epochs never mix. */
  readonly epoch: number;
  /** Values in the vector that will be averaged. */
  readonly size: number;
  /** Hash of the tensor layout (see schemaHash); @default the hash of the vector length */
  readonly schema?: string;
  /**
   * Peers expected in this round (e.g. those the swarm's progress shows at this epoch): a leader
   * closes its group as soon as it is ready and has them all, instead of waiting out the matchmaking
   * time. Clamped to [minGroupSize, targetGroupSize]. A function is read again while the group
   * forms: a pre-scheduled round's view of the swarm moves on while its peer computes.
   * @default targetGroupSize
   */
  readonly expectedPeers?: number | (() => number);
  /**
   * The most weight (samples) each peer may carry in this round, from the progress the swarm has
   * seen it make: larger declared weights are lowered to it when this peer leads, and in the part
   * this peer reduces (clamped, not excluded; logged and listed in the result's `clamped`). Read
   * while the group forms and again when the all-reduce begins. @default no bound
   */
  readonly weightBound?: (peer: string) => number;
  readonly signal?: AbortSignal;
}

export interface StepOptions extends Omit<ScheduleOptions, 'size'> {
  /** Samples behind this vector (hivemind's weight). */
  readonly weight: number;
  /**
   * The caller's view shows the swarm already stepped past `epoch`: matchmaking gives up as soon as
   * it finds nobody left to group with, instead of waiting out the matchmaking time (MatchmakingParams).
   */
  readonly late?: boolean;
  /** A part whose average moved further than this × the norm of our own values there keeps ours (see AllreduceOptions). */
  readonly maxRelativeChange?: number;
}

/**
 * hivemind's StepControl: a round whose matchmaking began before this peer had its vector, so the
 * group is (mostly) formed by the time the epoch ends. The group description is sent once every
 * member called `run`; a member that never does is dropped after `readyTimeoutMs`.
 */
export interface ScheduledStep {
  readonly epoch: number;
  /**
   * Averages `vector` (weight = samples) with the scheduled group; if that group did not form, looks
   * for one again once (`late`: as StepOptions.late, for that second look).
   */
  run(vector: Float32Array, weight: number, late?: boolean): Promise<StepResult>;
  /** Gives the round up: before `run` the group goes on without this peer; while it runs, the round is aborted: this peer stops sending and reducing its parts. */
  cancel(reason: string): void;
}

export type StepResult =
  | ({ readonly ok: true } & AllreduceResult)
  | { readonly ok: false; readonly stage: 'matchmaking'; readonly code: MatchmakingError['code']; readonly reason: string; readonly alone: boolean }
  /** A PowerSGD round whose phase did not average every part (phase Q: nor did its one retry): nothing of it is usable (peers would apply different gradients). */
  | { readonly ok: false; readonly stage: 'allreduce'; readonly code: 'PHASE_INCOMPLETE'; readonly reason: string };

/** Progress of a step, as a discriminated union (the same events feed logs and the UI). */
export type AveragingEvent =
  | { readonly type: 'matchmaking'; readonly key: string }
  | { readonly type: 'group'; readonly groupId: string; readonly peers: number; readonly leader: string }
  /** `mode`: how the round averaged (PowerSGD's rounds are `powersgd`, AveragerInit's `diloco` rounds `diloco`), as logs and the dashboard name it. */
  | { readonly type: 'averaged'; readonly result: AllreduceResult; readonly mode: AveragingMode }
  /** `bytesSent`: what this peer sent before the round failed (a PowerSGD round's phases), counted in its epoch's bytes. */
  | { readonly type: 'failed'; readonly stage: 'matchmaking' | 'allreduce'; readonly reason: string; readonly bytesSent?: number };

type Resolved = Required<Omit<AveragerInit, 'log' | 'onEvent' | 'fault' | 'state' | 'label' | 'uploadLimitBytesPerS' | 'readyTimeoutMs' | 'powerSgd' | 'diloco'>> & {
  readyTimeoutMs: number;
  label: string;
  uploadLimitBytesPerS: number | undefined;
  state: Required<NonNullable<AveragerInit['state']>>;
};

function resolve(init: AveragerInit): Resolved {
  const r: Resolved = {
    prefix: init.prefix,
    label: init.label ?? init.prefix,
    targetGroupSize: init.targetGroupSize ?? C.DEFAULT_TARGET_GROUP_SIZE,
    minGroupSize: init.minGroupSize ?? C.DEFAULT_MIN_GROUP_SIZE,
    matchmakingTimeMs: init.matchmakingTimeMs ?? C.DEFAULT_MATCHMAKING_TIME_MS,
    averagingTimeoutMs: init.averagingTimeoutMs ?? C.DEFAULT_AVERAGING_TIMEOUT_MS,
    averagingExpirationMs: init.averagingExpirationMs ?? Math.max(C.DEFAULT_AVERAGING_EXPIRATION_MS, init.matchmakingTimeMs ?? 0),
    senderTimeoutMs: init.senderTimeoutMs ?? C.DEFAULT_SENDER_TIMEOUT_MS,
    reducerTimeoutMs: init.reducerTimeoutMs ?? C.DEFAULT_REDUCER_TIMEOUT_MS,
    pollIntervalMs: init.pollIntervalMs ?? C.DEFAULT_POLL_INTERVAL_MS,
    readyTimeoutMs: 0, // below: defaults to the resolved expiration
    compression: init.compression ?? 'none',
    chunkValues: init.chunkValues ?? C.DEFAULT_CHUNK_VALUES,
    bandwidthBytesPerS: init.bandwidthBytesPerS ?? Math.min(C.DEFAULT_BANDWIDTH_BYTES_PER_S, init.uploadLimitBytesPerS ?? Infinity),
    uploadLimitBytesPerS: init.uploadLimitBytesPerS,
    maxAbs: init.maxAbs ?? C.DEFAULT_MAX_ABS_VALUE,
    aggregation: init.aggregation ?? C.DEFAULT_AGGREGATION,
    data: init.data ?? null,
    state: {
      maxConcurrentDownloads: init.state?.maxConcurrentDownloads ?? C.DEFAULT_MAX_CONCURRENT_DOWNLOADS,
      chunkBytes: init.state?.chunkBytes ?? C.DEFAULT_STATE_CHUNK_BYTES,
      stallTimeoutMs: init.state?.stallTimeoutMs ?? C.DEFAULT_STATE_STALL_TIMEOUT_MS,
      minBytesPerSecond: init.state?.minBytesPerSecond ?? C.DEFAULT_STATE_MIN_BYTES_PER_S,
      maxStateBytes: init.state?.maxStateBytes ?? C.DEFAULT_MAX_STATE_BYTES,
      advertiseIntervalMs: init.state?.advertiseIntervalMs ?? C.DEFAULT_STATE_ADVERTISE_INTERVAL_MS,
      maxDonors: init.state?.maxDonors ?? C.DEFAULT_MAX_DONORS_TRIED,
      trusted: init.state?.trusted ?? [],
    },
  };
  r.readyTimeoutMs = init.readyTimeoutMs ?? r.averagingExpirationMs;
  const check = (ok: boolean, field: string, value: unknown, accepted: string): void => {
    if (!ok) throw new RangeError(`averager "${r.prefix}": ${field} ${JSON.stringify(value)} is invalid; accepted: ${accepted}`);
  };
  const int = (v: number, lo: number, hi: number): boolean => Number.isInteger(v) && v >= lo && v <= hi;
  check(/^[a-z][a-z0-9_-]{0,63}$/.test(r.prefix), 'prefix', r.prefix, '1–64 of a-z, 0-9, "_", "-", starting with a letter');
  check(int(r.targetGroupSize, 1, C.MAX_GROUP_SIZE), 'targetGroupSize', r.targetGroupSize, `an integer from 1 to ${C.MAX_GROUP_SIZE}`);
  check(int(r.minGroupSize, 1, r.targetGroupSize), 'minGroupSize', r.minGroupSize, `an integer from 1 to targetGroupSize (${r.targetGroupSize})`);
  for (const f of ['matchmakingTimeMs', 'averagingTimeoutMs', 'senderTimeoutMs', 'reducerTimeoutMs', 'pollIntervalMs', 'readyTimeoutMs'] as const) check(int(r[f], 1, 3_600_000), f, r[f], 'an integer number of ms from 1 to 3600000');
  check(r.averagingExpirationMs >= r.matchmakingTimeMs, 'averagingExpirationMs', r.averagingExpirationMs, `at least matchmakingTimeMs (${r.matchmakingTimeMs})`);
  check((COMPRESSIONS as readonly string[]).includes(r.compression), 'compression', r.compression, COMPRESSIONS.join(', '));
  check(int(r.chunkValues, 1, C.MAX_CHUNK_VALUES), 'chunkValues', r.chunkValues, `an integer from 1 to ${C.MAX_CHUNK_VALUES}`);
  check(Number.isFinite(r.bandwidthBytesPerS) && r.bandwidthBytesPerS > 0, 'bandwidthBytesPerS', r.bandwidthBytesPerS, 'a positive number');
  check(r.maxAbs > 0, 'maxAbs', r.maxAbs, 'a positive number');
  check((AGGREGATIONS as readonly string[]).includes(r.aggregation), 'aggregation', r.aggregation, AGGREGATIONS.join(', '));
  const cap = r.uploadLimitBytesPerS;
  check(cap === undefined || (Number.isFinite(cap) && cap >= C.MIN_UPLOAD_LIMIT_BYTES_PER_S), 'uploadLimitBytesPerS', cap, `at least ${C.MIN_UPLOAD_LIMIT_BYTES_PER_S} (bytes/s)`);
  check(int(r.state.maxConcurrentDownloads, 1, 64), 'state.maxConcurrentDownloads', r.state.maxConcurrentDownloads, 'an integer from 1 to 64');
  check(int(r.state.chunkBytes, C.MIN_STATE_CHUNK_BYTES, C.MAX_STATE_CHUNK_BYTES), 'state.chunkBytes', r.state.chunkBytes, `${C.MIN_STATE_CHUNK_BYTES}–${C.MAX_STATE_CHUNK_BYTES}`);
  // also a donor's floor for its readers: 0 would be none
  check(Number.isFinite(r.state.minBytesPerSecond) && r.state.minBytesPerSecond > 0, 'state.minBytesPerSecond', r.state.minBytesPerSecond, 'a positive number (bytes/s)');
  return r;
}

/**
 * hivemind's DecentralizedAverager over a Cohort swarm node: `step` finds a group for this epoch
 * and averages a flat vector with it; `serveState`/`loadStateFromPeers` move whole states to
 * newcomers.
 */
export class Averager {
  private readonly cfg: Resolved;
  private readonly hub: AveragingHub;
  private readonly log: Logger;
  private server: StateServer | undefined;
  private started: Promise<void> | undefined;
  private stopped = false;
  private readonly running = new Set<AbortController>();

  constructor(
    private readonly node: SwarmNode,
    private readonly init: AveragerInit,
  ) {
    this.cfg = resolve(init);
    this.hub = AveragingHub.of(node);
    this.log = (init.log ?? pino({ level: 'silent' })).child({ component: 'averaging', prefix: this.cfg.prefix });
  }

  private async ready(): Promise<void> {
    if (this.stopped) throw new Error(`averager "${this.cfg.prefix}" is stopped`);
    if (this.started === undefined && this.cfg.uploadLimitBytesPerS !== undefined) this.hub.limitUpload(this.cfg.uploadLimitBytesPerS);
    this.started ??= this.hub.acquire();
    await this.started;
  }

  /** Finds a group for `opts.epoch` and averages `vector` with it (weighted by `opts.weight`). Never throws for others' faults. */
  async step(vector: Float32Array, opts: StepOptions): Promise<StepResult> {
    checkWeight(opts.weight);
    if (opts.maxRelativeChange !== undefined && !(opts.maxRelativeChange >= 0)) throw new RangeError(`maxRelativeChange ${opts.maxRelativeChange} must be a number ≥ 0`);
    const round = this.begin({ ...opts, size: vector.length }, false, opts.maxRelativeChange);
    return round.run(vector, opts.weight);
  }

  /**
   * hivemind's schedule_step: starts matchmaking for `opts.epoch` now, before this peer has its
   * vector (the swarm's ETA is within a matchmaking time); `run` hands the vector over.
   */
  schedule(opts: ScheduleOptions): ScheduledStep {
    return this.begin(opts, true);
  }

  private begin(opts: ScheduleOptions & { readonly late?: boolean }, scheduled: boolean, maxRelativeChange?: number): ScheduledStep {
    if (this.stopped) throw new Error(`averager "${this.cfg.prefix}" is stopped`);
    if (!Number.isInteger(opts.epoch) || opts.epoch < 0) throw new RangeError(`step epoch ${opts.epoch} must be a non-negative integer`);
    if (!Number.isInteger(opts.size) || opts.size < 0 || opts.size > C.MAX_VECTOR_VALUES) throw new RangeError(`vector of ${opts.size} values: accepted 0 to ${C.MAX_VECTOR_VALUES}`);
    const expected = opts.expectedPeers;
    const expectedPeers = typeof expected === 'function' ? () => this.groupSizeFor(expected()) : () => this.groupSizeFor(expected);
    expectedPeers(); // a bad count throws here, to the caller, not later inside matchmaking
    const abort = new AbortController();
    this.running.add(abort);
    const signal = opts.signal ? AbortSignal.any([opts.signal, abort.signal]) : abort.signal;
    const weight = new MemberWeight();
    const schema = this.init.powerSgd ? powerSgdSchema(opts.schema ?? schemaHash(opts.size), this.init.powerSgd.layout) : (opts.schema ?? schemaHash(opts.size));
    const round = { epoch: opts.epoch, schema, size: opts.size, expectedPeers, ...(opts.weightBound ? { weightBound: opts.weightBound } : {}), late: opts.late === true, signal };
    const matched = this.match(round, weight);
    matched.catch(() => undefined); // a cancelled round's rejection is nobody's to handle; `run` still sees it
    let ran = false;
    const run = async (vector: Float32Array, w: number, late = round.late): Promise<StepResult> => {
      if (ran) throw new Error(`the averaging round of epoch ${opts.epoch} already ran`);
      try {
        checkWeight(w);
        if (vector.length !== opts.size) throw new RangeError(`vector of ${vector.length} values, the round was scheduled for ${opts.size}`);
      } catch (err) {
        cancel((err as Error).message);
        throw err;
      }
      ran = true;
      try {
        weight.set(w);
        let group = await matched;
        if (group instanceof MatchmakingError && scheduled && !signal.aborted) {
          // the pre-scheduled group fell apart (a leader not ready in time, an early close): one fresh try, as an unscheduled step
          this.log.info(`the pre-scheduled group for epoch ${opts.epoch} did not form (${group.message}); looking for a group again`);
          group = await this.match({ ...round, late }, new MemberWeight(w));
        }
        if (group instanceof MatchmakingError) return { ok: false, stage: 'matchmaking', code: group.code, reason: group.message, alone: group.alone };
        if (this.init.powerSgd) return await this.reducePowerSgd(this.init.powerSgd, group, vector, signal, opts.weightBound);
        return { ok: true, ...this.report(group, await this.allreduce(group, vector, signal, this.cfg.averagingTimeoutMs, maxRelativeChange, opts.weightBound)) };
      } finally {
        this.running.delete(abort);
      }
    };
    const cancel = (reason: string): void => {
      ran = true;
      abort.abort(new Error(reason));
      this.running.delete(abort);
    };
    return { epoch: opts.epoch, run, cancel };
  }

  private groupSizeFor(expectedPeers: number | undefined): number {
    if (expectedPeers === undefined) return this.cfg.targetGroupSize;
    if (!Number.isInteger(expectedPeers) || expectedPeers < 1) throw new RangeError(`expectedPeers ${expectedPeers} must be an integer ≥ 1`);
    return Math.min(this.cfg.targetGroupSize, Math.max(this.cfg.minGroupSize, expectedPeers));
  }

  /** Matchmaking for one round: the group, or the MatchmakingError saying why none formed (logged). */
  private async match(
    round: { readonly epoch: number; readonly schema: string; readonly size: number; readonly expectedPeers: () => number; readonly weightBound?: (peer: string) => number; readonly late: boolean; readonly signal: AbortSignal },
    weight: MemberWeight,
  ): Promise<GroupInfo | MatchmakingError> {
    const { epoch, schema, size, signal } = round;
    await this.ready();
    const key = groupKey(C.GROUP_NAMESPACE, this.cfg.prefix, epoch);
    this.emit({ type: 'matchmaking', key });
    try {
      const group = await new Matchmaker(
        this.node,
        this.hub,
        {
          key,
          schema,
          data: this.cfg.data,
          self: { peer: this.node.peerId.toString(), bandwidth: this.cfg.bandwidthBytesPerS, clientMode: this.node.clientMode },
          weight,
          targetGroupSize: this.cfg.targetGroupSize,
          expectedPeers: round.expectedPeers,
          minGroupSize: this.cfg.minGroupSize,
          matchmakingTimeMs: this.cfg.matchmakingTimeMs,
          expirationMs: this.cfg.averagingExpirationMs,
          readyTimeoutMs: this.cfg.readyTimeoutMs,
          pollIntervalMs: this.cfg.pollIntervalMs,
          compression: this.cfg.compression,
          size,
          chunkValues: this.cfg.chunkValues,
          ...(round.weightBound ? { weightBound: round.weightBound } : {}),
          late: round.late,
          signal,
        },
        this.log,
      ).run();
      this.emit({ type: 'group', groupId: group.id, peers: group.members.length, leader: group.members[0]!.peer });
      return group;
    } catch (err) {
      if (!(err instanceof MatchmakingError)) throw err;
      // a peer alone in its swarm (a founder before anyone joins) steps on its own every epoch: said, not warned
      if (err.alone) this.log.info(`Averaging ${this.cfg.label}: no other peer in the swarm (${err.message})`);
      else this.log.warn(`Averaging ${this.cfg.label} failed: ${err.message}`);
      this.emit({ type: 'failed', stage: 'matchmaking', reason: err.message });
      return err;
    }
  }

  /** The all-reduce of `vector` with a formed group, within `timeoutMs`. */
  private allreduce(group: GroupInfo, vector: Float32Array, signal: AbortSignal, timeoutMs: number, maxRelativeChange: number | undefined, weightBound: ((peer: string) => number) | undefined, withhold?: string): Promise<AllreduceResult> {
    return allreduce(
      this.node,
      this.hub,
      group,
      vector,
      { senderTimeoutMs: this.cfg.senderTimeoutMs, reducerTimeoutMs: this.cfg.reducerTimeoutMs, allreduceTimeoutMs: timeoutMs, maxAbs: this.cfg.maxAbs, aggregation: this.cfg.aggregation, ...(maxRelativeChange === undefined ? {} : { maxRelativeChange }), ...(weightBound ? { weightBound } : {}), ...(withhold === undefined ? {} : { withhold }), signal, ...(this.init.fault ? { fault: this.init.fault } : {}) },
      this.log,
    );
  }

  /**
   * PowerSGD's round with a formed group: phase P all-reduces the P matrices, phase Q (after
   * orthonormalisation) the Q matrices and the uncompressed tensors, each in its own round of the
   * same members (phaseGroup), both within the one averaging timeout. A phase that leaves any part
   * unaveraged fails the round: this peer's error buffers get the gradient back out and the caller
   * takes a local step, as after a failed matchmaking. After a failed phase P it still reduces its
   * part of phase Q with its own values left out, so the members whose phase P completed (a member
   * excluded for NaN or a stall fails it alone) finish their round without it. Phase Q parts whose
   * reducers failed (a member gone after phase P) are retried once: the whole phase Q among the
   * other members (retryGroup).
   */
  private async reducePowerSgd(compressor: PowerSgd, group: GroupInfo, gradient: Float32Array, signal: AbortSignal, weightBound: ((peer: string) => number) | undefined): Promise<StepResult> {
    const started = Date.now();
    const meter = startCpuMeter(); // the compressor's arithmetic runs on this thread too: part of the round's cost
    const left = (): number => Math.max(1, this.cfg.averagingTimeoutMs - (Date.now() - started));
    const p = compressor.phaseP(gradient);
    const phases: AllreduceResult[] = [];
    const sum = (f: (r: AllreduceResult) => number): number => phases.reduce((n, r) => n + f(r), 0);
    const failed = (reason: string): StepResult => {
      compressor.abandon(gradient);
      this.log.warn(`Averaging ${this.cfg.label} failed: ${reason}`);
      this.emit({ type: 'failed', stage: 'allreduce', reason, bytesSent: sum((x) => x.bytesSent) });
      return { ok: false, stage: 'allreduce', code: 'PHASE_INCOMPLETE', reason };
    };
    try {
      const rp = await this.allreduce(phaseGroup(group, 'p', p.length), p, signal, left(), undefined, weightBound);
      phases.push(rp);
      if (rp.status !== 'complete') {
        phases.push(await this.allreduce(phaseGroup(group, 'q', compressor.layout.qLength), new Float32Array(compressor.layout.qLength), signal, left(), undefined, weightBound, 'its own phase P left parts unaveraged'));
        return failed(`PowerSGD phase P with ${group.members.length} peers ${unaveraged(rp)}`);
      }
      const q = compressor.phaseQ(rp.vector, gradient);
      const rq = await this.allreduce(phaseGroup(group, 'q', q.length), q, signal, left(), undefined, weightBound);
      phases.push(rq);
      let averaged = { group, rq };
      if (rq.status !== 'complete') {
        const reason = `PowerSGD phase Q with ${group.members.length} peers ${unaveraged(rq)}`;
        const retry = signal.aborted ? undefined : this.retryGroup(group, rq);
        if (retry === undefined) return failed(reason);
        this.log.warn(`${reason}; retrying phase Q among the ${retry.members.length} members whose parts were averaged`);
        const again = await this.allreduce(phaseGroup(group, `q/without/${retry.gone.join(',')}`, q.length, retry.members), q, signal, left(), undefined, weightBound);
        phases.push(again);
        if (again.status !== 'complete') return failed(`${reason}; retried among ${retry.members.length} members, it ${unaveraged(again)}`);
        averaged = { group: regroup(group, { members: retry.members }), rq: again };
      }
      const vector = new Float32Array(gradient.length);
      compressor.finish(averaged.rq.vector, vector);
      const result: AllreduceResult = {
        status: 'complete',
        vector,
        group: averaged.group,
        excluded: phases.flatMap((r) => r.excluded),
        clamped: rp.clamped,
        failedParts: [],
        bytesSent: sum((r) => r.bytesSent),
        bytesReceived: sum((r) => r.bytesReceived),
        durationMs: Date.now() - started,
        cpu: meter(gradient.byteLength),
        powerSgd: { rank: compressor.layout.rank, ratio: 1 / powerSgdWireFraction(compressor.layout) },
      };
      return { ok: true, ...this.report(averaged.group, result) };
    } catch (err) {
      compressor.abandon(gradient);
      throw err;
    }
  }

  /**
   * Who retries a phase Q that left parts unaveraged: the members whose parts were averaged, when
   * this peer is one of them, at least minGroupSize remain and one of them reduced a part of phase Q
   * (client-mode members reduce nothing). `gone`: the others, sorted, which name the retry's round.
   * Every member that saw the same parts fail derives the same retry; one that saw others fail names
   * another round, which then fails for the members that disagree.
   */
  private retryGroup(group: GroupInfo, rq: AllreduceResult): { readonly members: readonly Member[]; readonly gone: readonly string[] } | undefined {
    const gone = [...new Set(rq.failedParts.map((f) => f.reducer))].sort();
    const members = group.members.filter((m) => !gone.includes(m.peer));
    const reduces = rq.group.members.some((m, i) => !gone.includes(m.peer) && rq.group.parts[i]![1] > rq.group.parts[i]![0]);
    if (gone.includes(this.node.peerId.toString()) || members.length < this.cfg.minGroupSize || !reduces) return undefined;
    return { members, gone };
  }

  /** Logs and emits an all-reduce's outcome; returns it. */
  private report(group: GroupInfo, result: AllreduceResult): AllreduceResult {
    const n = group.members.length;
    const mb = ((result.bytesSent + result.bytesReceived) / 1e6).toFixed(1);
    const sent = (result.bytesSent / 1e6).toPrecision(3);
    const mode: AveragingMode = result.powerSgd ? 'powersgd' : this.init.diloco ? 'diloco' : 'plain';
    const words = result.powerSgd ? `PowerSGD rank ${result.powerSgd.rank}, ${result.powerSgd.ratio.toFixed(1)}× fewer values than plain averaging, ` : mode === 'diloco' ? 'DiLoCo outer step, ' : '';
    const cpu = `main thread busy ${result.cpu.busySeconds.toFixed(2)} s, process CPU ${result.cpu.processSeconds.toFixed(2)} s`;
    if (result.status === 'complete') this.log.info(`Averaged ${this.cfg.label} with ${n} peers (${mb} MB on the wire, ${sent} MB sent, ${words}${result.durationMs} ms, ${cpu})`);
    else this.log.warn(`Averaged ${this.cfg.label} with ${n} peers, but ${result.failedParts.length} part(s) kept local values: ${result.failedParts.map((p) => p.reason).join('; ')}`);
    for (const x of result.excluded) this.log.warn(`excluded peer ${x.peer} from averaging: ${x.reason}`);
    for (const x of result.clamped) this.log.warn(`lowered the weight of peer ${x.peer} from ${x.weight} to ${x.bound} in the part this peer reduced: more than the progress it has been seen to make`);
    this.emit({ type: 'averaged', result, mode });
    return result;
  }

  /** Serves this peer's state to newcomers and advertises its epoch; returns functions that re-advertise at once and that stop serving (withdrawing the advertisement). */
  async serveState(provider: StateProvider): Promise<{ advertise: () => Promise<void>; withdraw: () => Promise<void> }> {
    await this.ready();
    const { maxConcurrentDownloads, chunkBytes, stallTimeoutMs, advertiseIntervalMs, minBytesPerSecond } = this.cfg.state;
    // a donor asks of its reader the rate a newcomer asks of a donor
    const server = new StateServer(this.hub, this.cfg.prefix, provider, { maxConcurrentDownloads, chunkBytes, stallTimeoutMs, advertiseIntervalMs, minReaderBytesPerSecond: minBytesPerSecond }, this.log);
    await server.start();
    this.server = server;
    return { advertise: () => server.advertise(), withdraw: () => server.withdraw() };
  }

  /** Downloads the newest state any peer serves for this prefix (falls back donor by donor). Throws StateDownloadError. */
  async loadStateFromPeers(opts: { minEpoch?: number; signal?: AbortSignal } = {}): Promise<LoadedState> {
    await this.ready();
    const { maxStateBytes, stallTimeoutMs, minBytesPerSecond, maxDonors, trusted } = this.cfg.state;
    return loadStateFromPeers(this.node, this.hub, this.cfg.prefix, { maxStateBytes, stallTimeoutMs, minBytesPerSecond, maxDonors, trusted, ...opts }, this.log);
  }

  /** The state another averager of this node serves for this prefix (a trainer beside a coordinator); undefined when none does. */
  localState(): StateProvider | undefined {
    const provider = this.hub.stateServers.get(this.cfg.prefix)?.provider;
    return provider === this.server?.provider ? undefined : provider;
  }

  /** The newest epoch another peer advertises a state of for this prefix (undefined when none does). */
  async advertisedStateEpoch(): Promise<number | undefined> {
    await this.ready();
    return advertisedStateEpoch(this.node, this.hub, this.cfg.prefix, this.cfg.state.trusted);
  }

  /** Cancels running steps, stops serving state and releases the protocol handlers. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const a of this.running) a.abort(new Error(`averager "${this.cfg.prefix}" stopped`));
    this.server?.stop();
    if (this.started !== undefined) {
      await this.started.catch(() => undefined);
      await this.hub.release();
    }
  }

  private emit(event: AveragingEvent): void {
    try {
      this.init.onEvent?.(event);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'averaging event listener threw');
    }
  }
}

function checkWeight(weight: number): void {
  if (!(weight >= 0) || !Number.isFinite(weight)) throw new RangeError(`step weight ${weight} must be a finite number ≥ 0 (samples)`);
}

/** "left N part(s) unaveraged: <why each>", of an all-reduce that did not average every part. */
function unaveraged(r: AllreduceResult): string {
  return `left ${r.failedParts.length} part(s) unaveraged: ${r.failedParts.map((f) => f.reason).join('; ')}`;
}
