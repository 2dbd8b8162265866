/**
 * hivemind.Optimizer semantics: every peer accumulates gradients over its micro-batches and
 * publishes its progress; when the swarm together has gathered `targetBatchSize` samples, the peers
 * all-reduce their average gradients weighted by samples and all take the same LAMB step, the
 * learning rate scheduled by swarm epoch. A failed all-reduce falls back to a local step (as
 * hivemind does); a peer behind the swarm downloads the state from others. See docs/collab.md.
 */
import type { Logger } from '../log/logger.js';
import { createAverager, type Averager, type Compression } from '../averaging/index.js';
import type { AlbertConfig } from '../engine/albert/config.js';
import { clipGradNorm, GradientAccumulator, linearWarmupDecay, type Optimizer } from '../engine/optim/index.js';
import type { ParameterSet } from '../engine/params.js';
import type { RecordNamespace, SwarmNode } from '../swarm/index.js';
import { globalProgress, progressLine, readyForStep, type GlobalProgress, type PeerProgress } from './progress.js';
import { leaderboardRecords, PROGRESS_KEY, progressRecords, type LastStep, type ProgressRecord } from './records.js';
import { decodeTrainingState, encodeTrainingState } from './state.js';

/** Options as hivemind / Lightning's CollaborativeStrategy name them (times in seconds). */
export interface CollaborativeOptions {
  /** Samples the swarm gathers per optimizer step. */
  readonly targetBatchSize: number;
  /** How long peers wait to form an averaging group. @default 5 */
  readonly matchmakingTime?: number;
  /** Limit on one gradient all-reduce. @default 60 */
  readonly averagingTimeout?: number;
  /** Lifetime of a peer's group declaration. @default max(matchmakingTime, 15) */
  readonly averagingExpiration?: number;
  /** Wire compression of gradients. @default 'none' */
  readonly gradCompression?: Compression;
  /** Peers per averaging group. @default 256 */
  readonly targetGroupSize?: number;
  /** Lifetime of the progress record (hivemind's metadata_expiration). @default 120 */
  readonly metadataExpiration?: number;
  /** Upper bound on how long a peer trusts its last view of the swarm. @default 30 */
  readonly maxRefresh?: number;
  readonly peakLr: number;
  readonly warmupSteps: number;
  readonly totalSteps: number;
  /** @default 1 */
  readonly maxGradNorm?: number;
  readonly displayName?: string;
  /** Test-only fault injection: this peer claims `inflateClaims`× the samples it processed. Never set in production. */
  readonly fault?: { readonly inflateClaims?: number };
}

/** What one `step` call did. */
export type StepOutcome =
  | { readonly type: 'accumulated'; readonly progress: GlobalProgress }
  | { readonly type: 'stepped'; readonly epoch: number; readonly loss: number; readonly averagedWith: number; readonly reason?: string }
  | { readonly type: 'loaded'; readonly epoch: number; readonly donor: string };

/** State download prefix (parameters + optimizer) and gradient averaging prefix. */
export const STATE_PREFIX = 'state';
export const GRAD_PREFIX = 'grad';

export class CollaborativeOptimizer {
  private epochValue = 0;
  private readonly acc: GradientAccumulator;
  private readonly averaged: ParameterSet;
  private readonly records: RecordNamespace<ProgressRecord>;
  private readonly grads: Averager;
  private readonly state: Averager;
  private rate = 0;
  private reports: PeerProgress[] = [];
  private nextFetch = 0;
  private lastPublish = 0;
  private lastLog = 0;
  private lossSum = 0;
  private lastStep: LastStep | undefined;
  /** Re-advertises this peer's state epoch at once (after a step, so checkpoints and newcomers find it). */
  private advertise: () => Promise<void> = async () => {};
  private totals = { samples: 0, seconds: 0 };
  private readonly o: Required<Omit<CollaborativeOptions, 'displayName' | 'fault'>> & Pick<CollaborativeOptions, 'displayName' | 'fault'>;

  constructor(
    private readonly node: SwarmNode,
    private readonly config: AlbertConfig,
    private readonly params: ParameterSet,
    private readonly optimizer: Optimizer,
    options: CollaborativeOptions,
    private readonly log: Logger,
  ) {
    const matchmakingTime = options.matchmakingTime ?? 5;
    this.o = { matchmakingTime, averagingTimeout: 60, averagingExpiration: Math.max(matchmakingTime, 15), gradCompression: 'none', targetGroupSize: 256, metadataExpiration: 120, maxRefresh: 30, maxGradNorm: 1, ...options };
    checkOptions(this.o);
    this.acc = new GradientAccumulator(params);
    this.averaged = params.zerosLike();
    this.records = progressRecords(node);
    leaderboardRecords(node); // registered so this peer, as a DHT server, holds coordinators' leaderboards
    this.grads = createAverager(node, {
      prefix: GRAD_PREFIX,
      label: 'gradients',
      targetGroupSize: this.o.targetGroupSize,
      matchmakingTimeMs: Math.round(this.o.matchmakingTime * 1000),
      averagingExpirationMs: Math.round(this.o.averagingExpiration * 1000),
      averagingTimeoutMs: Math.round(this.o.averagingTimeout * 1000),
      compression: this.o.gradCompression,
      log,
    });
    this.state = createAverager(node, { prefix: STATE_PREFIX, label: 'state', log });
  }

  /** The swarm epoch this peer is at (optimizer steps the swarm has taken). */
  get epoch(): number {
    return this.epochValue;
  }

  /** Cumulative samples and compute seconds this peer contributed (resumable). */
  get contributed(): { samples: number; seconds: number } {
    return { ...this.totals };
  }

  /** Serves this peer's state to newcomers, publishes progress, and catches up if the swarm is ahead. */
  async start(resume: { epoch?: number; samples?: number; seconds?: number } = {}): Promise<StepOutcome | undefined> {
    this.epochValue = resume.epoch ?? 0;
    this.totals = { samples: resume.samples ?? 0, seconds: resume.seconds ?? 0 };
    const served = await this.state.serveState({
      epoch: () => this.epochValue,
      snapshot: () => ({ epoch: this.epochValue, data: encodeTrainingState({ epoch: this.epochValue, config: this.config, params: this.params, optimizer: this.optimizer.exportState() }) }),
    });
    this.advertise = served.advertise;
    await this.publish(true);
    const g = await this.fetchProgress();
    if (g.epoch > this.epochValue) return this.loadState(g.epoch);
    return undefined;
  }

  /**
   * Adds one micro-batch's gradient (of its mean loss over `samples` samples, computed in
   * `seconds`) and, when the swarm is ready, takes the collaborative step.
   */
  async step(grads: ParameterSet, samples: number, seconds: number, loss: number): Promise<StepOutcome> {
    this.acc.add(grads, samples);
    this.lossSum += loss * samples;
    this.totals.samples += samples;
    this.totals.seconds += seconds;
    const measured = samples / Math.max(seconds, 1e-6);
    this.rate = this.rate === 0 ? measured : 0.9 * this.rate + 0.1 * measured; // hivemind's performance_ema
    await this.publish(false);
    const now = Date.now();
    const g = now >= this.nextFetch ? await this.fetchProgress() : globalProgress(this.withOwn(now), now, this.progressOptions());
    if (now - this.lastLog >= 1000 * Math.max(1, g.refreshIn)) {
      this.lastLog = now;
      this.log.info(progressLine(g));
    }
    // hivemind's _should_load_state_from_peers: more than one epoch behind means this peer missed steps
    if (this.epochValue < g.epoch - 1) return this.loadState(g.epoch);
    // others already stepped past this epoch, or the swarm has gathered the target batch
    if (g.epoch > this.epochValue || readyForStep(g)) return this.update(g);
    return { type: 'accumulated', progress: g };
  }

  /** Stops averaging and serving state; the progress record expires by itself. */
  async stop(): Promise<void> {
    await Promise.all([this.grads.stop(), this.state.stop()]);
  }

  private async update(g: GlobalProgress): Promise<StepOutcome> {
    const samples = this.acc.samples;
    const avg = this.acc.average(this.averaged);
    const result = await this.grads.step(avg.data, { epoch: this.epochValue, weight: samples });
    let averagedWith = 1;
    let reason: string | undefined;
    let weights: Record<string, number> | undefined;
    if (result.ok) {
      avg.data.set(result.vector);
      averagedWith = result.group.members.length;
      weights = Object.fromEntries(result.group.members.map((m) => [m.peer, m.weight]));
    } else {
      reason = result.reason;
      this.log.warn(`Averaging gradients failed at epoch ${this.epochValue}: ${result.reason}; taking a local step with this peer's ${samples} samples`);
    }
    clipGradNorm(avg, this.o.maxGradNorm);
    const finished = this.epochValue;
    // hivemind: next epoch = max(local + 1, global) so a late peer lands on the swarm's epoch
    const next = Math.max(finished + 1, g.epoch);
    this.optimizer.step(this.params, avg, this.lr(next));
    const loss = this.lossSum / samples;
    this.lastStep = { epoch: finished, samples: this.claim(samples), loss, ...(weights ? { weights } : {}) };
    this.epochValue = next;
    this.acc.reset();
    this.lossSum = 0;
    this.log.info(`Step #${next}, loss ${loss.toFixed(5)}`);
    await Promise.all([this.publish(true), this.advertise().catch((err: unknown) => this.log.warn(`could not advertise state: ${(err as Error).message}`))]);
    this.nextFetch = 0;
    return { type: 'stepped', epoch: next, loss, averagedWith, ...(reason ? { reason } : {}) };
  }

  private async loadState(swarmEpoch: number): Promise<StepOutcome> {
    this.log.info(`this peer is at epoch ${this.epochValue}, the swarm at ${swarmEpoch}: loading state from peers`);
    try {
      const loaded = await this.state.loadStateFromPeers({ minEpoch: swarmEpoch });
      const s = decodeTrainingState(loaded.data, `peer ${loaded.donor}`);
      if (!s.params.sameLayout(this.params)) throw new Error(`the model of peer ${loaded.donor} has a different layout (vocabulary ${s.config.vocabSize}, hidden ${s.config.hiddenSize})`);
      this.params.data.set(s.params.data);
      if (s.optimizer) this.optimizer.importState(s.optimizer);
      this.epochValue = s.epoch;
      this.acc.reset(); // gradients of an older model are useless to the swarm
      this.lossSum = 0;
      this.log.info(`loaded state of epoch ${s.epoch} from ${loaded.donor}`);
      await this.publish(true);
      return { type: 'loaded', epoch: s.epoch, donor: loaded.donor };
    } catch (err) {
      // keep training: the next micro-batches retry, and averaging with an older model still helps
      this.log.warn(`could not load state from peers: ${(err as Error).message}; continuing at epoch ${this.epochValue}`);
      this.epochValue = Math.max(this.epochValue, swarmEpoch - 1);
      return { type: 'loaded', epoch: this.epochValue, donor: '' };
    }
  }

  private lr(epoch: number): number {
    return linearWarmupDecay(epoch, { peakLr: this.o.peakLr, warmupSteps: this.o.warmupSteps, totalSteps: this.o.totalSteps });
  }

  private claim(samples: number): number {
    return samples * (this.o.fault?.inflateClaims ?? 1);
  }

  private own(now: number): PeerProgress {
    return { peerId: this.node.peerId.toString(), epoch: this.epochValue, samples: this.acc.samples, samplesPerSecond: this.rate, time: now, clientMode: this.node.clientMode };
  }

  private withOwn(now: number): PeerProgress[] {
    const self = this.node.peerId.toString();
    return [...this.reports.filter((r) => r.peerId !== self), this.own(now)];
  }

  private progressOptions(): { targetBatchSize: number; maxRefreshSeconds: number } {
    return { targetBatchSize: this.o.targetBatchSize, maxRefreshSeconds: this.o.maxRefresh };
  }

  private async fetchProgress(): Promise<GlobalProgress> {
    const now = Date.now();
    try {
      const entries = await this.records.get(PROGRESS_KEY);
      this.reports = [...entries.values()].map((e) => ({ peerId: e.owner, epoch: e.value.epoch, samples: e.value.samples, samplesPerSecond: e.value.samplesPerSecond, time: e.value.time, clientMode: e.value.clientMode }));
    } catch (err) {
      this.log.warn(`could not read the swarm's progress: ${(err as Error).message}; using the last view`);
    }
    const g = globalProgress(this.withOwn(now), now, this.progressOptions());
    this.nextFetch = now + g.refreshIn * 1000;
    return g;
  }

  private async publish(force: boolean): Promise<void> {
    const now = Date.now();
    if (!force && now - this.lastPublish < 500) return;
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
    };
    try {
      const r = await this.records.store(PROGRESS_KEY, '', record, now + this.o.metadataExpiration * 1000);
      if (r.replicas === 0) this.log.warn(`no peer holds this peer's progress record (refused: ${r.refused.map((x) => `${x.peer}: ${x.reason}`).join('; ') || 'none reachable'})`);
    } catch (err) {
      this.log.warn(`could not publish progress: ${(err as Error).message}`);
    }
  }
}

function checkOptions(o: Required<Omit<CollaborativeOptions, 'displayName' | 'fault'>>): void {
  const positive = (v: number, name: string): void => {
    if (!(v > 0) || !Number.isFinite(v)) throw new RangeError(`${name} ${v} must be a positive number`);
  };
  if (!Number.isInteger(o.targetBatchSize) || o.targetBatchSize < 1) throw new RangeError(`target_batch_size ${o.targetBatchSize} must be an integer ≥ 1`);
  positive(o.matchmakingTime, 'matchmaking_time');
  positive(o.averagingTimeout, 'averaging_timeout');
  positive(o.metadataExpiration, 'metadata_expiration');
  positive(o.maxRefresh, 'max refresh');
  if (o.averagingExpiration < o.matchmakingTime) throw new RangeError(`averaging_expiration ${o.averagingExpiration} must be at least matchmaking_time ${o.matchmakingTime}`);
}
