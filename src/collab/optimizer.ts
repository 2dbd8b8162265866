/**
 * hivemind.Optimizer semantics: every peer accumulates gradients over its micro-batches and
 * publishes its progress; when the swarm together has gathered `targetBatchSize` samples, the peers
 * all-reduce their average gradients weighted by samples and all take the same LAMB step, the
 * learning rate scheduled by swarm epoch. A failed all-reduce falls back to a local step (as
 * hivemind does); a peer behind the swarm downloads the state from others. With `useLocalUpdates`
 * each peer steps on its own micro-batches instead; every `averageStateEvery` epochs the peers
 * all-reduce their parameters (state averaging). See docs/collab.md.
 */
import type { Logger } from '../log/logger.js';
import { advertisedStateEpoch, createAverager, PowerSgd, powerSgdLayout, type Averager, type AveragerInit, type AveragingEvent, type ScheduledStep, type StepResult } from '../averaging/index.js';
import { type AlbertConfig, clipGradNorm, GradientAccumulator, gradNorm, linearWarmupDecay, type Optimizer, type OptimizerState, type ParameterSet } from '../engine/index.js';
import type { RecordNamespace, SwarmNode } from '../swarm/index.js';
import { globalProgress, progressLine, readyForStep, type GlobalProgress, type PeerProgress } from './progress.js';
import { currentProgress, leaderboardRecords, PROGRESS_KEY, progressRecords, type LastStep, type ProgressRecord } from './records.js';
import { DelayedStep } from './delayed-step.js';
import { resolveCollaborativeOptions, type CollaborativeOptions, type ResolvedCollaborativeOptions } from './options.js';
import { FollowableReports } from './backed-progress.js';
import { BadStepCounter } from './bad-steps.js';
import { ObservedProgress } from './weight-bound.js';
import { TrainingStateError } from './errors.js';
import { decodeTrainingState, encodeTrainingState } from './state.js';
import { OuterNesterov } from './outer-optimizer.js';

/** After a failed state download a peer waits this long before the next try, doubling up to the max. */
const LOAD_RETRY_MIN_MS = 1000;
const LOAD_RETRY_MAX_MS = 60_000;
/** How long stop() waits for its "left" record to be stored (best effort: the record expires anyway). */
const LEAVE_PUBLISH_TIMEOUT_MS = 3000;

/** What the optimizer tells its owner as it goes (the dashboard's live numbers). */
export interface OptimizerEvents {
  /** Each averager's steps (matchmaking, group, result), labelled by what it averages. */
  readonly averaging?: (label: string, event: AveragingEvent) => void;
  /** The swarm's progress as each micro-batch leaves it, this micro-batch's samples included. */
  readonly progress?: (progress: GlobalProgress) => void;
}

/** What one `step` call did. */
export type StepOutcome =
  | { readonly type: 'accumulated'; readonly progress: GlobalProgress }
  | {
      readonly type: 'stepped';
      readonly epoch: number;
      readonly loss: number;
      /** Peers whose gradients this step averaged (1: a local step, or useLocalUpdates). */
      readonly averagedWith: number;
      /** The all-reduce used a group found before the epoch ended (hivemind's pre-scheduled matchmaking). */
      readonly preScheduled?: true;
      /** Why the gradient all-reduce failed (absent when it succeeded or was not attempted). */
      readonly reason?: string;
      /** It failed because matchmaking refused this peer for training on other data (DATA_MISMATCH; `reason` names both). */
      readonly dataMismatch?: true;
      /** Outcome of the state averaging that followed this step, when one was due. */
      readonly stateAveraging?: { readonly averagedWith: number } | { readonly reason: string };
      /** delay_optimizer_step: the update is not applied yet; it is taken during the next micro-batch (`computeWhileStepping`). */
      readonly pending?: true;
    }
  /** A state download: `donor` is empty when it failed (the peer stays at `epoch` and tries again later). */
  | { readonly type: 'loaded'; readonly epoch: number; readonly donor: string }
  /** delay_grad_averaging: the epoch advanced to `epoch`; its step follows as 'stepped' once the background all-reduce ends. */
  | { readonly type: 'averaging'; readonly epoch: number }
  /**
   * The micro-batch's loss or gradient was not finite: it added nothing. `inARow` such micro-batches
   * in a row, `total` in this peer's life; `leftAveraging` when this one made the peer stop averaging.
   */
  | { readonly type: 'skipped'; readonly reason: string; readonly inARow: number; readonly total: number; readonly leftAveraging?: string }
  /** A step left non-finite parameters: the backup of `epoch` was restored (the peer then re-syncs from the swarm). */
  | { readonly type: 'restored'; readonly epoch: number; readonly reason: string };

/** State download prefix (parameters + optimizer), gradient averaging and state (parameter) averaging prefixes. */
export const STATE_PREFIX = 'state';
const GRAD_PREFIX = 'grad';
const STATE_AVERAGING_PREFIX = 'state-avg';
/** DiLoCo's pseudo-gradient averaging: its own group key, so it never meets a gradient round. */
const DILOCO_PREFIX = 'diloco';

/** The newest epoch of the run's state a peer serves (what a newcomer loads: a restarted coordinator's checkpoint while nobody trains); undefined when none does. */
export function servedStateEpoch(node: SwarmNode, trusted: readonly string[]): Promise<number | undefined> {
  return advertisedStateEpoch(node, STATE_PREFIX, trusted);
}

/** An epoch whose optimizer step is being taken: `finished` → `next`, over `samples` with mean micro-batch `loss`. */
interface EndedEpoch {
  readonly finished: number;
  readonly next: number;
  /** The swarm had stepped past `finished` when this peer ended it: its round is (mostly) over. */
  readonly late: boolean;
  readonly samples: number;
  readonly loss: number;
}

/** What a volunteer whose data differs from the swarm's should do (logged with the refusal naming both hashes). */
export const DATA_MISMATCH_ADVICE =
  "this peer trains on other data than the swarm's peers, so it never averages with them. When the run pins its data (`cohort status --join CODE` shows it), restart this peer with an empty data directory (`cohort run --join CODE --data-dir NEW_DIR`) to fetch it; when it pins none, prepare the same data as the others (`cohort data prepare --source … --tokenizer …`) or found the run on one (`cohort run --coordinator --data-source …`)";

/** What the gradient all-reduce gives the step (a StepResult, or the error of a round that threw). */
type Reduced = StepResult | { readonly ok: false; readonly reason: string };

interface Averaged {
  readonly averagedWith: number;
  readonly preScheduled?: true;
  readonly reason?: string;
  readonly dataMismatch?: true;
  readonly weights?: Record<string, number>;
}

/** delay_grad_averaging's (or DiLoCo's overlapped) round running in the background while the next epoch trains. */
interface InFlight {
  readonly ended: EndedEpoch;
  readonly peers: number;
  readonly done: Promise<Reduced>;
  readonly preScheduled: boolean;
  /** Aborts the round: a dropped round must not go on sending from the buffer the next round fills. */
  readonly cancel: (reason: string) => void;
  result: Reduced | undefined;
}

export class CollaborativeOptimizer {
  private epochValue = 0;
  private readonly acc: GradientAccumulator;
  private readonly averaged: ParameterSet;
  private readonly records: RecordNamespace<ProgressRecord>;
  private readonly grads: Averager;
  private readonly state: Averager;
  /** Parameter averaging every `averageStateEvery` epochs (absent when never). */
  private readonly stateAverager: Averager | undefined;
  /** Samples this peer processed since its epoch began (with useLocalUpdates nothing is accumulated). */
  private epochSamples = 0;
  /** delay_grad_averaging's round in the background (at most one). */
  private inFlight: InFlight | undefined;
  /** The gradient round of the current epoch whose matchmaking began before the epoch ended. */
  private scheduled: ScheduledStep | undefined;
  /** delay_optimizer_step's compute copy and pending step (pass-through when off). */
  private readonly delayed: DelayedStep;
  private rate = 0;
  /**
   * When the last micro-batch was counted (performance.now(), ms), and the time since spent waiting
   * for rounds and state downloads: the rate is of the wall time between micro-batches without them.
   */
  private rateClock: { at: number; pausedMs: number } | undefined;
  /** Intervals the rate was measured over. */
  private rateIntervals = 0;
  private reports: PeerProgress[] = [];
  private nextFetch = 0;
  private lastPublish = 0;
  /** The periodic progress report in flight (publish). */
  private reporting: Promise<void> | undefined;
  /** The progress fetch in flight (progressView). */
  private fetching: Promise<GlobalProgress> | undefined;
  private lastLog = 0;
  /** Set by stop(): the last progress record says this peer left. */
  private left = false;
  /** State downloads that failed in a row, and when the next may be tried (ms). */
  private loadFailures = 0;
  private loadRetryAt = 0;
  /** This peer trains with the swarm: it loaded the state, or nobody was ahead of it at start. */
  private synced = false;
  /** Leaves out reports more than an epoch ahead that no advertised state backs (backed-progress.ts). */
  private readonly followable: FollowableReports;
  /** The samples each peer has been seen to make per epoch: bounds its weight in gradient rounds. */
  private readonly observed: ObservedProgress;
  private lossSum = 0;
  private lastStep: LastStep | undefined;
  /** Re-advertises this peer's state epoch at once (after a step, so checkpoints and newcomers find it). */
  private advertise: () => Promise<void> = async () => {};
  /** Stops serving this peer's state and says so in its advertisement (set once serving). */
  private withdraw: () => Promise<void> = async () => {};
  private totals = { samples: 0, seconds: 0 };
  /** Micro-batches skipped for a non-finite loss or gradient: in this peer's life, and in a row. */
  private readonly bad: BadStepCounter;
  /** Why this peer stays out of gradient averaging (its gradients kept being non-finite), until a finite micro-batch. */
  private outOfAveraging: string | undefined;
  /**
   * hivemind's backup_every_steps: the last state known to be finite, in memory. DiLoCo: θ_start of the
   * round (the swarm's, as stateToSave) with the outer momentum, so a restore within the round lands where the others do.
   */
  private backup: { epoch: number; params: Float32Array; outerMomentum: Float32Array | undefined; optimizer: OptimizerState } | undefined;
  /** Why the parameters are not finite, set by the optimizer step that made them so (restored before the next micro-batch). */
  private paramsBroken: string | undefined;
  /** Test-only: micro-batches whose gradients are still to be made non-finite (fault.nonFiniteMicroBatches). */
  private faultNonFinite: number;
  private readonly o: ResolvedCollaborativeOptions;
  /** DiLoCo's θ_start and outer momentum (absent unless outerOptimizer is diloco). */
  private readonly outer: OuterNesterov | undefined;
  /** DiLoCo: local steps this peer took since its round began. */
  private innerSteps = 0;

  constructor(
    private readonly node: SwarmNode,
    private readonly config: AlbertConfig,
    private readonly params: ParameterSet,
    private readonly optimizer: Optimizer,
    options: CollaborativeOptions,
    private readonly log: Logger,
    private readonly events: OptimizerEvents = {},
  ) {
    this.o = resolveCollaborativeOptions(options);
    this.faultNonFinite = this.o.fault?.nonFiniteMicroBatches ?? 0;
    this.bad = new BadStepCounter(this.o.maxBadMicroBatches);
    this.acc = new GradientAccumulator(params);
    this.delayed = new DelayedStep(params, this.o.delayOptimizerStep);
    this.averaged = params.zerosLike();
    this.records = progressRecords(node);
    leaderboardRecords(node); // registered so this peer, as a DHT server, holds coordinators' leaderboards
    const upload = this.o.uploadLimit === undefined ? {} : { uploadLimitBytesPerS: this.o.uploadLimit };
    const { averaging } = events;
    const observe = (label: string): Pick<AveragerInit, 'label' | 'onEvent'> => ({ label, ...(averaging ? { onEvent: (e: AveragingEvent) => averaging(label, e) } : {}) });
    const timing = {
      aggregation: this.o.aggregation,
      data: this.o.data,
      targetGroupSize: this.o.targetGroupSize,
      matchmakingTimeMs: Math.round(this.o.matchmakingTime * 1000),
      averagingExpirationMs: Math.round(this.o.averagingExpiration * 1000),
      averagingTimeoutMs: Math.round(this.o.averagingTimeout * 1000),
      ...upload,
      log,
    };
    // PowerSGD's Q matrices come from the run's seed and its error buffers start at zero, on a founder and a newcomer alike: nothing of it is downloaded
    const powerSgd = this.o.gradAverager === 'powersgd' ? { powerSgd: new PowerSgd(powerSgdLayout(params.specs, this.o.powersgdRank, this.o.powersgdMinRatio), this.o.seed) } : {};
    const diloco = this.o.outerOptimizer === 'diloco';
    this.outer = diloco ? new OuterNesterov(params, this.o.outerLr, this.o.outerMomentum) : undefined;
    // a DiLoCo round comes after each peer's own H steps, so peers reach it seconds apart: one that is
    // done waits for the others expected in the round for up to averaging_timeout, not matchmaking_time
    // (the group closes as soon as they joined), or the peers fall out of step and each round averages alone
    const roundWait = Math.max(this.o.matchmakingTime, this.o.averagingTimeout);
    const window = diloco ? { matchmakingTimeMs: Math.round(roundWait * 1000), averagingExpirationMs: Math.round(Math.max(this.o.averagingExpiration, roundWait) * 1000) } : {};
    this.grads = createAverager(node, { prefix: diloco ? DILOCO_PREFIX : GRAD_PREFIX, ...observe(diloco ? 'pseudo-gradients' : 'gradients'), compression: this.o.gradCompression, ...powerSgd, ...timing, ...window, diloco });
    this.state = createAverager(node, { prefix: STATE_PREFIX, ...observe('state'), log, ...upload, state: { trusted: this.o.trustedPeers } });
    this.followable = new FollowableReports(() => this.state.advertisedStateEpoch(), log);
    this.observed = new ObservedProgress({ targetBatchSize: this.o.targetBatchSize, maxStaleSeconds: this.o.metadataExpiration });
    if (this.o.averageStateEvery > 0) {
      this.stateAverager = createAverager(node, { prefix: STATE_AVERAGING_PREFIX, ...observe(this.o.averageOptStatistics ? 'parameters and optimizer statistics' : 'parameters'), compression: this.o.stateAveragingCompression, ...timing });
    }
  }

  /** The other peers' progress reports as last read (each read replaces the array). */
  get peerReports(): readonly PeerProgress[] {
    return this.reports;
  }

  /** The swarm epoch this peer is at (optimizer steps the swarm has taken). */
  get epoch(): number {
    return this.epochValue;
  }

  /**
   * The parameters to compute micro-batches on: with delayOptimizerStep a copy that lags the master
   * by the pending step, otherwise the master parameters themselves.
   */
  get computeParams(): ParameterSet {
    return this.delayed.compute;
  }

  /**
   * Computes one micro-batch (`work` on `computeParams`) and takes the pending optimizer step on the
   * master meanwhile (delayOptimizerStep; otherwise just `work`). The training loop calls this for
   * every micro-batch, then `step` with its gradients.
   */
  computeWhileStepping<T>(work: (params: ParameterSet) => Promise<T>): Promise<T> {
    return this.delayed.overlap(work);
  }

  /**
   * The state this peer keeps in its checkpoints, after a pending delayed step: the epoch its
   * parameters hold (while delay_grad_averaging's round runs, the epoch it averages: its step is not
   * taken yet) and the parameters; in DiLoCo θ_start of its round (the swarm's; the inner steps taken
   * since are this peer's own) with the outer momentum, and while an overlapped round is in flight
   * that round's epoch (θ_start moves once it lands). Views of live values: copy them before the next step.
   */
  stateToSave(): { epoch: number; params: ParameterSet; outerMomentum?: ParameterSet } {
    this.delayed.run();
    const epoch = this.inFlight?.ended.finished ?? this.epochValue;
    return this.outer ? { epoch, params: this.outer.start, outerMomentum: this.outer.momentum } : { epoch, params: this.params };
  }

  /** The epoch of the state served to newcomers: DiLoCo's θ_start is the in-flight round's until it lands; otherwise the epoch this peer is at. */
  private servedEpoch(): number {
    return this.outer ? (this.inFlight?.ended.finished ?? this.epochValue) : this.epochValue;
  }

  /** Cumulative samples and compute seconds this peer contributed (resumable). */
  get contributed(): { samples: number; seconds: number } {
    return { ...this.totals };
  }

  /** Serves this peer's state to newcomers, publishes progress, and catches up if the swarm is ahead. */
  async start(resume: { epoch?: number; samples?: number; seconds?: number; outerMomentum?: ParameterSet | undefined } = {}): Promise<StepOutcome | undefined> {
    this.epochValue = resume.epoch ?? 0;
    this.totals = { samples: resume.samples ?? 0, seconds: resume.seconds ?? 0 };
    // the parameters the caller resumed from begin the first round, with the momentum it saved (its own checkpoint's)
    this.outer?.reset(this.params, resume.outerMomentum?.data);
    this.takeBackup(); // so a broken step always has a state to go back to (a state load replaces it)
    const served = await this.state.serveState({
      epoch: () => this.servedEpoch(),
      snapshot: () => {
        // a newcomer gets the parameters of the epoch it is told (DiLoCo: θ_start and the outer momentum, as checkpointed)
        const state = { ...this.stateToSave(), epoch: this.servedEpoch() };
        // a run that compresses state averaging sends newcomers its state in fp16 too (half the bytes of parameters and first moments)
        const fp16 = this.o.stateAveragingCompression !== 'none';
        return { epoch: state.epoch, data: encodeTrainingState({ ...state, config: this.config, optimizer: this.optimizer.exportState() }, { fp16 }) };
      },
      settled: () => !this.delayed.isPending,
    });
    this.advertise = served.advertise;
    this.withdraw = served.withdraw;
    await this.publish(true);
    const g = await this.fetchProgress();
    if (g.epoch > this.epochValue) return this.loadState(g.epoch);
    // nobody trains ahead, but a state ahead is served: a restarted coordinator's checkpoint of a run
    // whose peers all left (advertised epochs are backed as in donors(): one peer alone cannot lure many)
    const servedEpoch = await this.state.advertisedStateEpoch().catch(() => undefined);
    if (servedEpoch !== undefined && servedEpoch > this.epochValue) return this.loadState(servedEpoch);
    // nobody ahead: this peer trains with the swarm from here, as its first peer does; unless reports
    // ahead were left out (peers asleep, or a bogus report): then it trains on its own until it can load
    this.synced = this.followable.leftOut === 0;
    return undefined;
  }

  /**
   * Adds one micro-batch's gradient (of its mean loss over `samples` samples, computed in
   * `seconds`) and, when the swarm is ready, takes the collaborative step. With useLocalUpdates it
   * steps on `grads` at once (clipping them in place); DiLoCo too, or with innerBatchSize once enough
   * samples were accumulated (their average is written into `grads` and clipped there).
   */
  async step(grads: ParameterSet, samples: number, seconds: number, loss: number): Promise<StepOutcome> {
    if (this.faultNonFinite > 0) {
      this.faultNonFinite--;
      grads.data[0] = Number.NaN;
    }
    // the step taken since the last micro-batch (delay_optimizer_step, use_local_updates) broke the parameters
    if (this.paramsBroken !== undefined) return this.restore(this.paramsBroken);
    // a norm that is not finite means a non-finite value (squares of float32 values cannot overflow float64)
    if (!Number.isFinite(loss) || !Number.isFinite(gradNorm(grads))) return this.skip(grads, loss);
    if (this.outOfAveraging !== undefined) {
      this.log.info(`gradients are finite again: this peer rejoins averaging (it left because ${this.outOfAveraging})`);
      this.outOfAveraging = undefined;
    }
    this.bad.reset();
    if (this.o.useLocalUpdates || this.outer) {
      if (!Number.isSafeInteger(samples) || samples <= 0) throw new RangeError(`micro-batch sample count must be an integer > 0; got ${samples}`);
      // hivemind's use_local_updates and DiLoCo's inner steps: the optimizer steps on every micro-batch,
      // or with innerBatchSize once the micro-batches accumulated hold that many samples; the epoch's rate applies
      if (this.acc.samples === 0 && samples >= (this.o.innerBatchSize ?? 1)) this.innerStep(grads);
      else {
        this.acc.add(grads, samples);
        if (this.acc.samples >= this.o.innerBatchSize!) this.innerStep(this.acc.average(grads));
      }
      if (this.paramsBroken !== undefined) return this.restore(this.paramsBroken);
    } else this.acc.add(grads, samples);
    this.epochSamples += samples;
    this.lossSum += loss * samples;
    this.totals.samples += samples;
    this.totals.seconds += seconds;
    // hivemind's PerformanceEMA: samples per second of wall time from one micro-batch to the next,
    // rounds and state downloads left out (its pause_updates). Others extrapolate this peer's record
    // with it, and between micro-batches a peer also loads data and stores records, computing nothing:
    // a rate of compute time alone overstated it (tiny's epochs ended with 60 % of their batch).
    // `seconds` is a floor (a caller may report compute time above the wall time it took). The first
    // micro-batch only starts the clock (it includes building the engine's session); the first ten
    // intervals are averaged evenly, then with weight 0.1, so the rate settles within an epoch
    const at = performance.now();
    if (this.rateClock !== undefined) {
      const wall = (at - this.rateClock.at - this.rateClock.pausedMs) / 1000;
      const alpha = Math.max(0.1, 1 / ++this.rateIntervals);
      this.rate += alpha * (samples / Math.max(seconds, wall, 1e-6) - this.rate);
    }
    this.rateClock = { at, pausedMs: 0 };
    await this.publish(false);
    const g = await this.progressView();
    // before a step can end the epoch and reset this peer's count: the micro-batch that completes the
    // target batch is seen too, not only those that leave it short of it
    this.events.progress?.(g);
    const now = Date.now();
    if (now - this.lastLog >= 1000 * Math.max(1, g.refreshIn)) {
      this.lastLog = now;
      this.log.info(progressLine(g));
    }
    // hivemind's _should_load_state_from_peers: more than one epoch behind means this peer missed
    // steps. Until a download succeeds it computes but never steps: a step would put its own (possibly
    // freshly initialised) model at the swarm's epoch and average its gradients into everyone's. A peer
    // that has not trained with the swarm yet (its first download failed, or it started while reports
    // ahead were left out as unbacked) loads instead of stepping as soon as anyone is ahead at all
    if (this.epochValue < g.epoch - 1 || (!this.synced && g.epoch > this.epochValue)) return now >= this.loadRetryAt ? this.loadState(g.epoch) : { type: 'accumulated', progress: g };
    // delay_optimizer_step: a step the loop did not take during this micro-batch is taken now
    this.delayed.run();
    if (this.paramsBroken !== undefined) return this.restore(this.paramsBroken);
    this.backupIfDue();
    const due = this.due(g);
    // delay_grad_averaging, DiLoCo's overlap: the background round ended during the last micro-batch; its update is applied now
    if (this.inFlight?.result && !due) return this.applyInFlight(this.inFlight, this.inFlight.result);
    if (due) return this.update(g);
    this.maybeSchedule(g);
    return { type: 'accumulated', progress: g };
  }

  /** Whether this peer's epoch ends: others already stepped past it, or the swarm has gathered the target batch; DiLoCo: or this peer took its H inner steps. */
  private due(g: GlobalProgress): boolean {
    return g.epoch > this.epochValue || readyForStep(g, this.o.batchSizeLead) || (this.outer !== undefined && this.innerSteps >= this.o.innerSteps);
  }

  /**
   * The swarm's progress for a micro-batch's decisions. A fetch that is due runs in the background, at
   * most one at a time (hivemind's ProgressTracker fetches in its own task): a DHT read takes tens of
   * milliseconds to over a second under load, and micro-batches waited for it. The fetch in flight is
   * waited for only when the last view puts the epoch's end within a matchmaking time (or past it: this
   * peer would pre-schedule, step or load the state), so that when a peer acts, the round it joins
   * and the members it expects come from a current view; a slow peer's view is otherwise a whole
   * micro-batch older, and it met its partners' pre-scheduled groups already closed. DiLoCo schedules
   * nothing ahead (maybeSchedule), so it waits only when its last view ends the round: its micro-batches
   * in the last matchmaking time of each round waited for DHT reads, 0.4-0.7 s per peer per round of
   * 5-10 s in a loaded 3-peer run.
   */
  private async progressView(): Promise<GlobalProgress> {
    const now = Date.now();
    if (now >= this.nextFetch) this.fetching ??= this.fetchProgress().finally(() => (this.fetching = undefined));
    const last = this.viewAt(now);
    const schedulesAhead = this.outer === undefined && last.eta <= this.o.matchmakingTime;
    return this.fetching !== undefined && (this.due(last) || schedulesAhead) ? this.fetching : last;
  }

  /**
   * hivemind's _maybe_schedule_gradient_averaging: once the swarm's ETA is within a matchmaking
   * time, matchmaking begins in the background, so the group is (mostly) formed when the epoch ends
   * instead of costing a matchmaking time after it. The gradients and weight follow in `update`.
   */
  private maybeSchedule(g: GlobalProgress): void {
    // DiLoCo's round ends after H inner steps, which the swarm's ETA (samples to the target batch) does not foresee
    if (this.o.useLocalUpdates || this.outer || this.scheduled || g.peers < 2 || !(g.eta <= this.o.matchmakingTime)) return;
    this.log.info(`Pre-scheduling gradient averaging round in ${g.eta.toFixed(2)} sec`);
    const epoch = this.epochValue;
    // read again when this peer is ready: its view then is up to a micro-batch newer
    this.scheduled = this.grads.schedule({ epoch, size: this.params.size, expectedPeers: () => this.peersAt(epoch), weightBound: this.weightBound(epoch) });
  }

  /** The pre-scheduled round of `epoch`, if there is one (a round scheduled for another epoch is given up). */
  private takeScheduled(epoch: number): ScheduledStep | undefined {
    const round = this.scheduled;
    if (round?.epoch !== epoch) return this.dropScheduled(`this peer is ending epoch ${epoch}`);
    this.scheduled = undefined;
    return round;
  }

  private dropScheduled(reason: string): undefined {
    this.scheduled?.cancel(reason);
    this.scheduled = undefined;
    return undefined;
  }

  /**
   * Stops averaging and serving state (withdrawing its advertisement), and tells the swarm this peer
   * left (a last progress record), so peers behind it stop trying to catch up with it instead of
   * waiting for its records to expire. A pending step is dropped (flush() first to keep it).
   */
  async stop(): Promise<void> {
    this.delayed.discard();
    // its state advertisement would otherwise outlive it, and a peer starting alone would try to load it
    await Promise.race([this.withdraw(), new Promise((r) => setTimeout(r, LEAVE_PUBLISH_TIMEOUT_MS).unref())]);
    await Promise.all([this.grads.stop(), this.state.stop(), this.stateAverager?.stop()]);
    this.left = true;
    await Promise.race([this.publish(true), new Promise((r) => setTimeout(r, LEAVE_PUBLISH_TIMEOUT_MS).unref())]);
  }

  private async update(g: GlobalProgress): Promise<StepOutcome> {
    // delay_grad_averaging, DiLoCo's overlap: a round still running is finished and applied before the next begins
    if (this.inFlight) {
      const applied = await this.applyInFlight(this.inFlight, await this.paused(this.inFlight.done));
      // DiLoCo: this peer's own round is due as well; it begins now, not a micro-batch later (the caller sees the step that landed)
      if (this.outer && applied.type === 'stepped') await this.outerRound(this.outer, this.ended(g), g.peers);
      return applied;
    }
    const s = this.ended(g);
    if (this.o.useLocalUpdates) {
      this.beginEpoch(s.next);
      return this.afterStep(s, { averagedWith: 1 }, g.peers);
    }
    if (this.outer) return this.outerRound(this.outer, s, g.peers);
    const avg = this.acc.average(this.averaged);
    const scheduled = this.takeScheduled(s.finished);
    const { done, cancel } = this.reduce(avg.data, s, scheduled);
    if (!this.o.delayGradAveraging) {
      const result = await this.paused(done);
      this.beginEpoch(s.next);
      return this.applyAveraged(s, result, g.peers, scheduled !== undefined);
    }
    return this.inBackground({ ended: s, peers: g.peers, done, preScheduled: scheduled !== undefined, cancel, result: undefined }, 'gradients', 'training');
  }

  /**
   * The all-reduce of `vector` for the ended epoch `s` (in the round pre-scheduled for it, if any).
   * `done` never rejects: a background round must not become an unhandled rejection; `cancel` aborts it.
   */
  private reduce(vector: Float32Array, s: EndedEpoch, scheduled?: ScheduledStep): { done: Promise<Reduced>; cancel: (reason: string) => void } {
    const abort = new AbortController();
    // a late peer gives up as soon as nobody is left in its round: waiting out the matchmaking time
    // (about an epoch) made it late for the next round too, round after round (docs/collab.md)
    const reducing = scheduled ? scheduled.run(vector, s.samples, s.late) : this.grads.step(vector, { epoch: s.finished, weight: s.samples, expectedPeers: this.peersAt(s.finished), weightBound: this.weightBound(s.finished), late: s.late, signal: abort.signal });
    const done = reducing.catch((err: unknown): Reduced => ({ ok: false, reason: (err as Error).message }));
    return { done, cancel: scheduled ? (reason) => scheduled.cancel(reason) : (reason) => abort.abort(new Error(reason)) };
  }

  /** The epoch this peer ends now: hivemind's next epoch = max(local + 1, global), so a late peer lands on the swarm's epoch. */
  private ended(g: GlobalProgress): EndedEpoch {
    return { finished: this.epochValue, next: Math.max(this.epochValue + 1, g.epoch), late: g.epoch > this.epochValue, samples: this.epochSamples, loss: this.lossSum / this.epochSamples };
  }

  /** Moves to the next epoch while `round` runs in the background; its update is applied once it ends (applyInFlight). */
  private async inBackground(round: InFlight, what: string, meanwhile: string): Promise<StepOutcome> {
    this.beginEpoch(round.ended.next);
    void round.done.then((r) => (round.result = r));
    this.inFlight = round;
    this.log.info(`Began averaging the ${what} of epoch ${round.ended.finished} in the background; ${meanwhile} epoch ${round.ended.next} meanwhile`);
    await this.publish(true);
    this.nextFetch = 0;
    return { type: 'averaging', epoch: round.ended.next };
  }

  /**
   * Applies what is still in the background (before saving the model): delay_grad_averaging's round
   * once it is over (StepOutcome of its step) and delay_optimizer_step's pending step.
   */
  async flush(): Promise<StepOutcome | undefined> {
    this.delayed.run(); // an earlier epoch's step first, so the round's step can be deferred and taken in order
    const outcome = this.inFlight ? await this.applyInFlight(this.inFlight, await this.inFlight.done) : undefined;
    this.delayed.run();
    // a model about to be saved must not be a broken one
    if (this.paramsBroken !== undefined) return this.restore(this.paramsBroken);
    return outcome;
  }

  private applyInFlight(round: InFlight, result: Reduced): Promise<StepOutcome> {
    this.inFlight = undefined;
    if (this.outer) return this.applyOuter(this.outer, round.ended, result, round.peers, true);
    return this.applyAveraged(round.ended, result, round.peers, round.preScheduled);
  }

  /** Gives up the background round, if any: its update is of a model this peer no longer holds. */
  private dropInFlight(reason: string): void {
    this.inFlight?.cancel(reason);
    this.inFlight = undefined;
  }

  private beginEpoch(epoch: number): void {
    this.epochValue = epoch;
    this.acc.reset();
    this.epochSamples = 0;
    this.lossSum = 0;
    this.innerSteps = 0;
  }

  /** Takes the optimizer step of an ended epoch with the all-reduced gradient (or this peer's own when the round failed). */
  private applyAveraged(s: EndedEpoch, result: Reduced, peers: number, preScheduled: boolean): Promise<StepOutcome> {
    if (result.ok) this.averaged.data.set(result.vector);
    const averaged = this.roundOutcome(s, result, 'gradients', preScheduled);
    const lr = this.lr(s.next);
    // `averaged` stays untouched until the step is taken: the next round fills it only after step() took it
    this.delayed.defer(() => this.optimizerStep(this.averaged, lr));
    return this.afterStep(s, averaged, peers);
  }

  /** What a round gave the step, warning when it failed (`what` was averaged). */
  private roundOutcome(s: EndedEpoch, result: Reduced, what: string, preScheduled: boolean): Averaged {
    if (result.ok) return { averagedWith: result.group.members.length, weights: Object.fromEntries(result.group.members.map((m) => [m.peer, m.weight])), ...(preScheduled ? { preScheduled: true } : {}) };
    const local = `taking a local step with this peer's ${s.samples} samples`;
    if ('alone' in result && result.alone) this.log.info(`no other peer to average ${what} with at epoch ${s.finished}: ${local}`);
    else this.log.warn(`Averaging ${what} failed at epoch ${s.finished}: ${result.reason}; ${local}`);
    const dataMismatch = 'code' in result && result.code === 'DATA_MISMATCH';
    if (dataMismatch) this.log.error(DATA_MISMATCH_ADVICE);
    return { averagedWith: 1, reason: result.reason, ...(dataMismatch ? { dataMismatch: true as const } : {}) };
  }

  /**
   * DiLoCo's round: this peer's pseudo-gradient θ_start − θ is averaged with the group's (weighted by
   * samples), and θ_start takes the outer step on the average (on its own when the round failed);
   * the parameters become the new θ_start, the same on every member. With outerOverlap the round runs
   * in the background while the inner steps go on (applyOuter re-bases them once it lands).
   */
  private async outerRound(outer: OuterNesterov, s: EndedEpoch, peers: number): Promise<StepOutcome> {
    // a round the swarm ended between inner steps: the micro-batches accumulated since the last one are
    // in its sample count (the pseudo-gradient's weight), so they take their inner step first (in
    // `averaged`, free until the pseudo-gradient below: an overlapped round in flight was applied before this)
    if (this.acc.samples > 0) {
      this.innerStep(this.acc.average(this.averaged));
      if (this.paramsBroken !== undefined) return this.restore(this.paramsBroken);
    }
    // `averaged` holds the pseudo-gradient sent until the outer step is taken: the overlap's re-basing reads it
    const delta = outer.pseudoGradient(this.params, this.averaged.data);
    const { done, cancel } = this.reduce(delta, s);
    if (this.o.outerOverlap) return this.inBackground({ ended: s, peers, done, preScheduled: false, cancel, result: undefined }, 'pseudo-gradient', 'inner steps of');
    const result = await this.paused(done);
    this.beginEpoch(s.next);
    return this.applyOuter(outer, s, result, peers, false);
  }

  /** DiLoCo's outer step on the round's average (this peer's own pseudo-gradient when it failed); `overlapped`: re-basing the inner steps taken since. */
  private applyOuter(outer: OuterNesterov, s: EndedEpoch, result: Reduced, peers: number, overlapped: boolean): Promise<StepOutcome> {
    const averaged = this.roundOutcome(s, result, 'pseudo-gradients', false);
    const sent = this.averaged.data;
    outer.step(result.ok ? result.vector : sent, this.params, overlapped ? sent : undefined);
    this.checkFinite('the outer step');
    return this.afterStep(s, averaged, peers);
  }

  /** A local step (use_local_updates, DiLoCo's inner step) on `grads`, which may be the caller's buffer; what was accumulated for it is used up. */
  private innerStep(grads: ParameterSet): void {
    this.optimizerStep(grads, this.lr(this.epochValue + 1));
    this.acc.reset();
    this.innerSteps++;
  }

  /** Clips `grads` and takes the optimizer step; parameters it leaves non-finite are restored before the next micro-batch. */
  private optimizerStep(grads: ParameterSet, lr: number): void {
    clipGradNorm(grads, this.o.maxGradNorm);
    this.optimizer.step(this.params, grads, lr);
    this.checkFinite('the optimizer step');
  }

  /** Marks the parameters broken when `what` (a step) left a non-finite value in them. */
  private checkFinite(what: string): void {
    // the norm is the fast test (block kernels); the element-wise search only names the culprit
    if (Number.isFinite(gradNorm(this.params))) return;
    const bad = this.params.firstNonFinite();
    this.paramsBroken = `${what} left ${bad ? `${bad.value} in ${bad.name}[${bad.index}]` : 'parameters whose norm is not finite'}`;
  }

  private skip(grads: ParameterSet, loss: number): StepOutcome {
    const bad = grads.firstNonFinite();
    return this.skipMicroBatch(Number.isFinite(loss) ? `its gradient ${bad ? `${bad.name}[${bad.index}] is ${bad.value}` : 'norm is not finite'}` : `its loss is ${loss}`);
  }

  /**
   * Counts a micro-batch whose loss or gradient was not finite (`reason` says which) and adds nothing
   * of it (`step` calls this itself for non-finite input; a loop whose backend already knows, such as
   * an fp16 loss scaler that gave up, calls it instead of `step`). After maxBadMicroBatches in a row
   * this peer leaves averaging until a finite micro-batch comes.
   */
  skipMicroBatch(reason: string): StepOutcome {
    const atLimit = this.bad.add();
    this.log.warn(`skipped a micro-batch at epoch ${this.epochValue}: ${reason} (${this.bad.inARow} in a row, ${this.bad.total} in total)`);
    let left: string | undefined;
    if (atLimit) {
      left = `its last ${this.bad.inARow} micro-batches had a non-finite loss or gradient (last: ${reason})`;
      this.outOfAveraging = left;
      this.dropScheduled('this peer leaves averaging');
      this.log.warn(`this peer leaves averaging: ${left}; it goes on computing and rejoins with its first finite micro-batch`);
    }
    return { type: 'skipped', reason, inARow: this.bad.inARow, total: this.bad.total, ...(left ? { leftAveraging: left } : {}) };
  }

  /** Keeps a copy of the state every backupEverySteps epochs (never of parameters a pending or broken step will change). */
  private backupIfDue(): void {
    if (this.delayed.isPending || this.paramsBroken !== undefined) return;
    if (this.backup === undefined || this.servedEpoch() >= this.backup.epoch + this.o.backupEverySteps) this.takeBackup();
  }

  /** Copies into the previous backup's buffers: a backup allocates nothing after the first. */
  private takeBackup(): void {
    const params = this.backup?.params ?? new Float32Array(this.params.size);
    params.set((this.outer?.start ?? this.params).data);
    const outerMomentum = this.outer ? (this.backup?.outerMomentum ?? new Float32Array(this.params.size)) : undefined;
    outerMomentum?.set(this.outer!.momentum.data);
    this.backup = { epoch: this.servedEpoch(), params, outerMomentum, optimizer: this.optimizer.exportState(this.backup?.optimizer) };
  }

  /**
   * hivemind's restore_from_backup: parameters that are no longer finite are replaced by the last
   * backup, with its optimizer state and epoch; what was accumulated or pending for the broken model
   * is dropped, and the peer loads the swarm's state as soon as anyone is ahead (a re-sync).
   */
  private restore(why: string): StepOutcome {
    const b = this.backup!;
    this.paramsBroken = undefined;
    this.params.data.set(b.params);
    this.optimizer.importState(b.optimizer);
    this.outer?.reset(this.params, b.outerMomentum);
    this.log.warn(`parameters became non-finite at epoch ${this.epochValue} (${why}): restored the backup of epoch ${b.epoch}; loading the swarm's state once anyone is ahead`);
    this.dropScheduled('this peer restored its backup');
    this.beginEpoch(b.epoch);
    this.dropInFlight('this peer restored its backup');
    this.delayed.discard();
    this.synced = false;
    this.loadRetryAt = 0;
    this.nextFetch = 0;
    return { type: 'restored', epoch: b.epoch, reason: why };
  }

  /** Reports the step, averages state when due, publishes progress and re-advertises the state. */
  private async afterStep(s: EndedEpoch, averaged: Averaged, peers: number): Promise<StepOutcome> {
    this.lastStep = { epoch: s.finished, samples: this.claim(s.samples), loss: s.loss, ...(averaged.weights ? { weights: averaged.weights } : {}) };
    // hivemind's should_average_state: every average_state_every epochs, when the swarm is not empty
    const averageStateNow = this.stateAverager && s.next % this.o.averageStateEvery === 0 && peers > 1 ? this.stateAverager : undefined;
    if (averageStateNow) this.delayed.run(); // the parameters after this epoch's step are the ones averaged
    if (this.paramsBroken !== undefined) return this.restore(this.paramsBroken);
    this.backupIfDue();
    const pending = this.delayed.isPending;
    this.log.info(`Step #${s.next}, loss ${s.loss.toFixed(5)}${pending ? ' (update taken during the next micro-batch)' : ''}`);
    const stateAveraging = averageStateNow ? await this.averageState(averageStateNow, s.next) : undefined;
    await Promise.all([this.publish(true), this.advertise().catch((err: unknown) => this.log.warn(`could not advertise state: ${(err as Error).message}`))]);
    this.nextFetch = 0;
    return { type: 'stepped', epoch: s.next, loss: s.loss, averagedWith: averaged.averagedWith, ...(averaged.preScheduled ? { preScheduled: true } : {}), ...(averaged.reason ? { reason: averaged.reason } : {}), ...(averaged.dataMismatch ? { dataMismatch: true } : {}), ...(stateAveraging ? { stateAveraging } : {}), ...(pending ? { pending } : {}) };
  }

  /**
   * hivemind's state averaging round: all-reduces the parameters (and, with averageOptStatistics,
   * LAMB's moments) with the peers that finished the same epoch, uniform weights as hivemind's
   * TrainingStateAverager. A failed round keeps this peer's own state.
   */
  private async averageState(averager: Averager, epoch: number): Promise<{ averagedWith: number } | { reason: string }> {
    const n = this.params.size;
    const opt = this.o.averageOptStatistics ? this.optimizer.exportState() : undefined;
    const vector = opt ? new Float32Array(3 * n) : this.params.data;
    if (opt) {
      vector.set(this.params.data, 0);
      vector.set(opt.expAvg.data, n);
      vector.set(opt.expAvgSq.data, 2 * n);
    }
    // issue 23: a part whose average moved further than its own norm (one bad reducer's answer) keeps this peer's values
    const result = await this.paused(averager.step(vector, { epoch, weight: 1, maxRelativeChange: 1 }));
    if (!result.ok) {
      this.log.warn(`Averaging state failed at epoch ${epoch}: ${result.reason}; keeping this peer's parameters`);
      return { reason: result.reason };
    }
    this.params.data.set(result.vector.subarray(0, n));
    this.outer?.start.data.set(this.params.data); // DiLoCo's next round begins from the averaged parameters
    this.delayed.masterChanged();
    if (opt) {
      opt.expAvg.data.set(result.vector.subarray(n, 2 * n));
      // averaging rounds and compression must not make a second moment negative (LAMB takes its square root)
      opt.expAvgSq.data.set(result.vector.subarray(2 * n, 3 * n).map((v) => Math.max(0, v)));
      this.optimizer.importState(opt);
    }
    return { averagedWith: result.group.members.length };
  }

  /** Awaits `p` with its time left out of this peer's rate (hivemind's PerformanceEMA.pause_updates). */
  private async paused<T>(p: Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await p;
    } finally {
      if (this.rateClock) this.rateClock.pausedMs += performance.now() - started;
    }
  }

  private async loadState(swarmEpoch: number): Promise<StepOutcome> {
    this.log.info(`this peer is at epoch ${this.epochValue}, the swarm at ${swarmEpoch}: loading state from peers`);
    this.dropScheduled(`this peer loads the state of epoch ≥ ${swarmEpoch}`);
    try {
      // DiLoCo's overlap: a peer serves θ_start of its round in flight, one epoch behind its progress,
      // until the round lands; when the next round is due by then (peers waiting for others to join)
      // that lag never closes. The in-flight round's state is what its members started from: a peer
      // that loads it joins that round (its group may still be forming) and lands where they do
      const minEpoch = this.o.outerOverlap ? swarmEpoch - 1 : swarmEpoch;
      const loaded = await this.paused(this.state.loadStateFromPeers({ minEpoch }));
      const s = decodeTrainingState(loaded.data, `peer ${loaded.donor}`);
      // the download checked the header's epoch against the advertisements; an honest donor's bytes say the same
      if (s.epoch !== loaded.epoch) throw new TrainingStateError(`peer ${loaded.donor} sent a state of epoch ${s.epoch} in a download of epoch ${loaded.epoch}`);
      if (!s.params.sameLayout(this.params)) throw new TrainingStateError(`the model of peer ${loaded.donor} has a different layout (vocabulary ${s.config.vocabSize}, hidden ${s.config.hiddenSize})`);
      this.params.data.set(s.params.data);
      if (s.optimizer) this.optimizer.importState(s.optimizer);
      this.outer?.reset(this.params, s.outerMomentum?.data); // θ_start of the donor's round; no momentum from a donor of a non-DiLoCo run
      this.beginEpoch(s.epoch); // gradients of an older model are useless to the swarm
      this.dropInFlight(`this peer loaded the state of epoch ${s.epoch}`); // so is a background round's update of the older model
      this.delayed.discard(); // and a pending optimizer step
      this.loadFailures = 0;
      this.loadRetryAt = 0;
      this.synced = true;
      this.takeBackup();
      this.log.info(`loaded state of epoch ${s.epoch} from ${loaded.donor}`);
      await this.publish(true);
      return { type: 'loaded', epoch: s.epoch, donor: loaded.donor };
    } catch (err) {
      // hivemind retries until it loads; so does this peer, backing off, while it keeps computing. It
      // stops once the swarm's progress shows nobody ahead (they said they left, or their records expired)
      const wait = Math.min(LOAD_RETRY_MAX_MS, LOAD_RETRY_MIN_MS * 2 ** this.loadFailures++);
      this.loadRetryAt = Date.now() + wait;
      this.log.warn(`could not load state from peers: ${(err as Error).message}; staying at epoch ${this.epochValue}, next try in ${(wait / 1000).toFixed(0)} s`);
      return { type: 'loaded', epoch: this.epochValue, donor: '' };
    }
  }

  /**
   * The most gradient weight (samples) a member of `epoch`'s round may carry: the samples its progress
   * records showed this peer in that epoch plus a small allowance, at most twice the target batch
   * (weight-bound.ts), so a member declaring 10¹⁵ counts as what it was seen to compute.
   */
  private weightBound(epoch: number): (peer: string) => number {
    return (peer) => this.observed.bound(peer, epoch, Date.now());
  }

  private lr(epoch: number): number {
    return linearWarmupDecay(epoch, { peakLr: this.o.peakLr, warmupSteps: this.o.warmupSteps, totalSteps: this.o.totalSteps });
  }

  private claim(samples: number): number {
    return samples * (this.o.fault?.inflateClaims ?? 1);
  }

  private own(now: number): PeerProgress {
    return { peerId: this.node.peerId.toString(), epoch: this.epochValue, samples: this.epochSamples, samplesPerSecond: this.rate, time: now, clientMode: this.node.clientMode };
  }

  /**
   * Peers expected to average `epoch`'s gradients (this one included), so the group can close once
   * they have all joined instead of waiting out the matchmaking time: those whose progress shows them
   * at that epoch, and those one behind — a slower peer finishing its last micro-batch is about to
   * catch up (leaving it out would close every group just before it arrives). With
   * delay_grad_averaging a peer moves to the next epoch as its round begins, so those one ahead are
   * still in `epoch`'s round. This peer is in the round it runs, whatever its epoch is by the time a
   * pre-scheduled round reads this again (it was counted out once it had moved on: expectedPeers 0).
   */
  private peersAt(epoch: number): number {
    const ahead = this.o.delayGradAveraging || this.o.outerOverlap ? 1 : 0;
    return 1 + this.reports.filter((r) => r.epoch >= epoch - 1 && r.epoch <= epoch + ahead).length;
  }

  /** The swarm's progress as of `now`: the reports last read, and this peer's own as it is now. */
  private viewAt(now: number): GlobalProgress {
    return globalProgress([...this.reports, this.own(now)], now, { targetBatchSize: this.o.targetBatchSize, maxRefreshSeconds: this.o.maxRefresh });
  }

  private async fetchProgress(): Promise<GlobalProgress> {
    const now = Date.now();
    try {
      const entries = await this.records.get(PROGRESS_KEY);
      // peers that left neither train nor serve state: this peer's swarm epoch is that of those still training
      // this peer's own record gives way to its current view (viewAt); an earlier run's must not hold it back
      const self = this.node.peerId.toString();
      const reports = currentProgress(entries, now).filter((e) => e.value.left !== true && e.owner !== self).map((e) => ({ peerId: e.owner, epoch: e.value.epoch, samples: e.value.samples, samplesPerSecond: e.value.samplesPerSecond, time: e.value.time, clientMode: e.value.clientMode }));
      this.reports = await this.followable.filter(reports, this.epochValue + 1);
      this.observed.observe(this.reports);
    } catch (err) {
      // a read still in flight when this peer left fails as its node stops: nothing to report
      if (!this.left) this.log.warn(`could not read the swarm's progress: ${(err as Error).message}; using the last view`);
    }
    const g = this.viewAt(now);
    // from the read's end, as hivemind's fetcher: a read slower than the refresh period does not run back to back
    this.nextFetch = Date.now() + g.refreshIn * 1000;
    return g;
  }

  /**
   * Stores this peer's progress record. `force` (epoch changes, leaving) waits for the store, so the
   * swarm sees the change before this peer goes on; a periodic report does not: it runs in the
   * background, at most one at a time (hivemind reports from a background task too), because a DHT
   * store takes tens to hundreds of milliseconds and micro-batches waited for it (over half of a
   * peer's time at load 12 with 40 ms micro-batches). An older report landing after a newer one
   * does not replace it: the entry with the later expiration wins.
   */
  private async publish(force: boolean): Promise<void> {
    if (force) return this.storeProgress();
    if (this.reporting || Date.now() - this.lastPublish < 500) return;
    this.reporting = this.storeProgress().finally(() => (this.reporting = undefined));
  }

  private async storeProgress(): Promise<void> {
    const now = Date.now();
    this.lastPublish = now;
    const own = this.own(now);
    const record: ProgressRecord = {
      epoch: own.epoch,
      samples: this.claim(own.samples),
      samplesPerSecond: this.claim(own.samplesPerSecond),
      time: now,
      clientMode: own.clientMode,
      totalSamples: this.claim(this.totals.samples),
      computeSeconds: this.totals.seconds,
      ...(this.o.displayName ? { displayName: this.o.displayName } : {}),
      ...(this.lastStep ? { lastStep: this.lastStep } : {}),
      ...(this.left ? { left: true as const } : {}),
    };
    try {
      const r = await this.records.store(PROGRESS_KEY, '', record, now + this.o.metadataExpiration * 1000);
      if (r.replicas === 0) this.log.warn(`no peer holds this peer's progress record (refused: ${r.refused.map((x) => `${x.peer}: ${x.reason}`).join('; ') || 'none reachable'})`);
    } catch (err) {
      this.log.warn(`could not publish progress: ${(err as Error).message}`);
    }
  }
}
