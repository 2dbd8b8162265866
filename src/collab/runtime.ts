/**
 * The node's plug-ins for collaborative training (desktop app and headless node): Start joins the
 * swarm of the configured join code and trains with it; without a join code, or when the swarm
 * cannot be reached, it trains alone (LocalTrainingRuntime) and says so. The coordinator toggle
 * runs a Coordinator on the same swarm node. A node that joins adopts the swarm's published run
 * parameters (run-params.ts); one that founds the swarm publishes its own (tiny, 256 by default).
 */
import type { Logger } from '../log/logger.js';
import { LocalTrainingRuntime } from '../node/local-training.js';
import { MemoryLimitError, type RssProbe } from '../node/memory-limit.js';
import { DEFAULT_SETTINGS } from '../shared/settings-schema.js';
import type { CoordinatorRole, FoundLeaderboard, SwarmPresence, TrainingEvent, TrainingRuntime, TrainingSettings } from '../node/runtime-parts.js';
import type { NodeReachability } from '../shared/api.js';
import type { Store } from '../store/index.js';
import { createSwarmNode, type SwarmNode } from '../swarm/index.js';
import { Coordinator } from './coordinator.js';
import { latestLeaderboard } from './leaderboard.js';
import type { CollaborativeOptions } from './optimizer.js';
import { runPeer } from './peer.js';
import { APP_RUN_SETTINGS, collabOptionsOf, describeRunSettings, joinPeerIds, newRunParams, publishRunParams, readRunParams, runSettingsOf, type RunSettings } from './run-params.js';

/**
 * Settings of the swarm this node founds (the tiny preset, as `npm start`'s swarm); when it joins
 * one, the swarm's published run parameters replace the run-wide ones (target batch size and the
 * run-wide `optimizer` options).
 */
export interface CollabNodeOptions {
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** Run id of a swarm this node starts itself (coordinator on, no join code). @default 'cohort-albert' */
  readonly runId?: string;
  /** @default 256 */
  readonly targetBatchSize?: number;
  /** @default 4 */
  readonly batchSize?: number;
  /** @default 5 */
  readonly matchmakingTime?: number;
  /** Further hivemind.Optimizer options of this node's training peer (the run-wide ones only when it founds the swarm). */
  readonly optimizer?: Partial<Pick<CollaborativeOptions, 'averagingTimeout' | 'targetGroupSize' | 'gradCompression' | 'averageStateEvery' | 'stateAveragingCompression' | 'averageOptStatistics' | 'useLocalUpdates' | 'delayGradAveraging' | 'delayOptimizerStep' | 'batchSizeLead'>>;
  readonly listen?: readonly string[];
  /** Where the memory watchdog reads this process's memory (both trainers). @default the process's RSS */
  readonly memoryProbe?: RssProbe;
  /** How often the memory watchdog samples. @default WATCHDOG_INTERVAL_MS */
  readonly watchdogIntervalMs?: number;
}

/** How often the dashboard's leaderboard is looked up on the swarm (coordinators publish theirs about as often). */
export const LEADERBOARD_REFRESH_MS = 30_000;

/**
 * One swarm node per process, shared by the training runtime and the coordinator role; while it
 * runs, the newest coordinator leaderboard is looked up in the background for the dashboard.
 */
export class SharedSwarm implements SwarmPresence {
  private node: Promise<SwarmNode> | undefined;
  /** The node once started, for the synchronous reads. */
  private started: SwarmNode | undefined;
  private users = 0;
  private board: FoundLeaderboard | null = null;
  private boardTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: CollabNodeOptions) {}

  /** The node for `joinCode` (or a new swarm when there is none); the first caller decides. */
  async acquire(joinCode: string | undefined): Promise<SwarmNode> {
    this.users++;
    this.node ??= createSwarmNode({ ...(joinCode ? { initialPeers: joinCode } : { runId: this.o.runId ?? 'cohort-albert' }), ...(this.o.listen ? { listen: this.o.listen } : {}), log: this.o.log }, this.o.store);
    try {
      const node = await this.node;
      if (this.started !== node) {
        this.started = node;
        this.watchLeaderboard(node);
      }
      return node;
    } catch (err) {
      this.node = undefined;
      this.users--;
      throw err;
    }
  }

  async release(): Promise<void> {
    if (--this.users > 0 || !this.node) return;
    const node = this.node;
    this.node = undefined;
    this.started = undefined;
    clearInterval(this.boardTimer);
    this.board = null;
    await (await node).stop();
  }

  reachability(): NodeReachability | null {
    return this.started?.reachability ?? null;
  }

  peerId(): string | null {
    return this.started?.peerId.toString() ?? null;
  }

  leaderboard(): FoundLeaderboard | null {
    return this.board;
  }

  private watchLeaderboard(node: SwarmNode): void {
    clearInterval(this.boardTimer);
    let looking = false;
    const look = (): void => {
      if (looking) return; // a slow DHT lookup is not stacked on
      looking = true;
      latestLeaderboard(node)
        .then((board) => {
          if (this.started === node && board) this.board = board;
        })
        .catch((err: unknown) => this.o.log.debug(`could not read the leaderboard: ${(err as Error).message}`))
        .finally(() => (looking = false));
    };
    look();
    this.boardTimer = setInterval(look, LEADERBOARD_REFRESH_MS);
    this.boardTimer.unref();
  }
}

export class CollaborativeRuntime implements TrainingRuntime {
  private settings: TrainingSettings | undefined;
  private readonly listeners = new Set<(e: TrainingEvent) => void>();
  private readonly local: LocalTrainingRuntime;
  private mode: 'swarm' | 'local' | undefined;
  private loop: Promise<void> | undefined;
  private abort: AbortController | undefined;

  constructor(
    private readonly o: CollabNodeOptions,
    private readonly swarm: SharedSwarm,
  ) {
    this.local = new LocalTrainingRuntime({ store: o.store, dataDir: o.dataDir, log: o.log, ...watchdogOptions(o) });
    this.local.subscribe((e) => this.emit(e));
  }

  /** The join code the volunteer configured (empty: none). */
  get joinCode(): string | undefined {
    return this.settings?.joinCode?.trim() || undefined;
  }

  configure(settings: TrainingSettings): void {
    this.settings = settings;
    this.local.configure(settings);
  }

  async start(): Promise<void> {
    if (this.mode) return;
    const joinCode = this.joinCode;
    if (!joinCode) {
      this.o.log.info('no swarm configured (set a join code to train with volunteers): training alone');
      return this.startLocal();
    }
    let node: SwarmNode;
    try {
      node = await this.swarm.acquire(joinCode);
      const report = await node.ready;
      if (report.connected.length === 0) {
        await this.swarm.release();
        this.o.log.warn(`could not reach any peer of the join code's swarm: ${report.failed.map((f) => `${f.addr}: ${f.error}`).join('; ') || 'none answered'}; training alone until the next start`);
        return this.startLocal();
      }
    } catch (err) {
      this.o.log.warn(`could not join the swarm: ${(err as Error).message}; training alone until the next start`);
      return this.startLocal();
    }
    const run = await swarmRunSettings(node, joinCode, this.o);
    this.mode = 'swarm';
    this.abort = new AbortController();
    const policies = this.settings?.policies;
    this.loop = runPeer({
      node,
      store: this.o.store,
      dataDir: this.o.dataDir,
      log: this.o.log,
      preset: run.preset,
      batchSize: this.o.batchSize ?? 4,
      seqLen: run.seqLen,
      seed: run.seed,
      threads: policies?.maxCpuThreads,
      memoryLimitMiB: policies?.maxMemoryMiB ?? DEFAULT_SETTINGS.policies.maxMemoryMiB,
      ...watchdogOptions(this.o),
      provider: policies?.useGpu === false ? 'cpu' : 'auto',
      precision: policies?.precision ?? 'fp32',
      signal: this.abort.signal,
      collab: { ...localOptimizerOptions(this.o), ...collabOptionsOf(run), matchmakingTime: this.o.matchmakingTime ?? 5, ...(this.settings?.displayName ? { displayName: this.settings.displayName } : {}), ...(policies?.bandwidthCapKiBps ? { uploadLimit: policies.bandwidthCapKiBps * 1024 } : {}) },
      onOutcome: (outcome, collab) => {
        const at = Date.now();
        if (outcome.type === 'accumulated') {
          const g = outcome.progress;
          this.emit({ type: 'progress', swarm: { epoch: g.epoch, peersAlive: g.peers, samplesPerSecond: g.samplesPerSecond, samplesAccumulated: Math.round(g.estimatedSamples), targetBatchSize: g.targetBatchSize, etaSeconds: Number.isFinite(g.eta) ? g.eta : null }, at });
        } else if (outcome.type === 'stepped') this.emit({ type: 'progress', swarm: { epoch: collab.epoch, lastLoss: outcome.loss }, at });
      },
    })
      .then(() => undefined)
      .catch((err: unknown) => {
        if (!(err instanceof MemoryLimitError)) return this.o.log.error(`collaborative training stopped: ${(err as Error).message}`);
        this.o.log.warn(`training stopped: ${err.message}`);
        this.emit({ type: 'halted', reason: err.message, at: Date.now() });
      })
      .finally(async () => {
        this.mode = undefined;
        this.loop = undefined;
        await this.swarm.release();
      });
  }

  async pause(): Promise<void> {
    if (this.mode === 'local') {
      await this.local.pause();
      this.mode = undefined;
      return;
    }
    this.abort?.abort();
    await this.loop;
  }

  subscribe(listener: (event: TrainingEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async startLocal(): Promise<void> {
    this.mode = 'local';
    await this.local.start();
  }

  private emit(event: TrainingEvent): void {
    for (const l of this.listeners) l(event);
  }
}

function watchdogOptions(o: CollabNodeOptions): Pick<CollabNodeOptions, 'memoryProbe' | 'watchdogIntervalMs'> {
  return { ...(o.memoryProbe ? { memoryProbe: o.memoryProbe } : {}), ...(o.watchdogIntervalMs ? { watchdogIntervalMs: o.watchdogIntervalMs } : {}) };
}

/** The dashboard's coordinator switch: a Coordinator on this node's swarm node. */
export class CollaborativeCoordinatorRole implements CoordinatorRole {
  private coordinator: Coordinator | undefined;

  constructor(
    private readonly o: CollabNodeOptions,
    private readonly swarm: SharedSwarm,
    private readonly joinCode: () => string | undefined,
  ) {}

  async start(): Promise<{ joinCode: string; multiaddrs: readonly string[] }> {
    const joinCode = this.joinCode();
    const node = await this.swarm.acquire(joinCode);
    await node.ready;
    const run = await swarmRunSettings(node, joinCode, this.o);
    this.coordinator = new Coordinator({ node, store: this.o.store, dataDir: this.o.dataDir, log: this.o.log, targetBatchSize: run.targetBatchSize });
    this.coordinator.start();
    return { joinCode: node.joinCode(), multiaddrs: node.multiaddrs() };
  }

  async stop(): Promise<void> {
    const running = this.coordinator;
    if (!running) return;
    this.coordinator = undefined;
    await running.stop();
    await this.swarm.release();
  }
}

/** The run-wide settings this node uses when it founds the swarm. */
function foundingRunSettings(o: CollabNodeOptions): RunSettings {
  const { gradCompression, stateAveragingCompression, averageStateEvery, averageOptStatistics, useLocalUpdates, batchSizeLead } = o.optimizer ?? {};
  return {
    ...APP_RUN_SETTINGS,
    ...(o.targetBatchSize !== undefined ? { targetBatchSize: o.targetBatchSize } : {}),
    ...(gradCompression !== undefined ? { gradCompression } : {}),
    ...(stateAveragingCompression !== undefined ? { stateAveragingCompression } : {}),
    ...(averageStateEvery !== undefined ? { averageStateEvery } : {}),
    ...(averageOptStatistics !== undefined ? { averageOptStatistics } : {}),
    ...(useLocalUpdates !== undefined ? { useLocalUpdates } : {}),
    ...(batchSizeLead !== undefined ? { batchSizeLead } : {}),
  };
}

/** This peer's own optimizer options, which may differ between peers. */
function localOptimizerOptions(o: CollabNodeOptions): Pick<CollaborativeOptions, 'averagingTimeout' | 'targetGroupSize' | 'delayGradAveraging' | 'delayOptimizerStep'> {
  const { averagingTimeout, targetGroupSize, delayGradAveraging, delayOptimizerStep } = o.optimizer ?? {};
  return {
    ...(averagingTimeout !== undefined ? { averagingTimeout } : {}),
    ...(targetGroupSize !== undefined ? { targetGroupSize } : {}),
    ...(delayGradAveraging !== undefined ? { delayGradAveraging } : {}),
    ...(delayOptimizerStep !== undefined ? { delayOptimizerStep } : {}),
  };
}

/**
 * The run's settings on `node`: a joiner adopts (and keeps re-publishing) the swarm's; a founder, or a
 * joiner that finds no record in time, uses `foundingRunSettings` (the founder publishes them).
 */
async function swarmRunSettings(node: SwarmNode, joinCode: string | undefined, o: CollabNodeOptions): Promise<RunSettings> {
  const own = foundingRunSettings(o);
  if (joinCode === undefined) {
    o.log.info(`founding swarm "${node.runId}" with run parameters: ${describeRunSettings(own)}`);
    // in the background: a lone founder's first DHT lookup only ends at its timeout
    publishRunParams(node, newRunParams(own), o.log).catch((err: unknown) => o.log.error(`could not publish the run parameters: ${(err as Error).message}`));
    return own;
  }
  const swarm = await readRunParams(node, { joinPeers: joinPeerIds(joinCode), log: o.log });
  if (swarm === undefined) {
    o.log.warn(`no run parameters published in swarm "${node.runId}": using this node's own (${describeRunSettings(own)})`);
    return own;
  }
  const run = runSettingsOf(swarm.params);
  o.log.info(`adopting the swarm's run parameters (published by ${swarm.owner}): ${describeRunSettings(run)}`);
  // re-published by every peer that trains with them, so the record outlives the founder
  publishRunParams(node, swarm.params, o.log).catch((err: unknown) => o.log.warn(`could not re-publish the run parameters: ${(err as Error).message}`));
  return run;
}
