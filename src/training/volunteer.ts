/**
 * What Start and the coordinator switch do in the app and the headless node: with a join code, train
 * with that swarm (adopting its run settings); without one, or when the swarm cannot be reached, train
 * alone and say so. The coordinator switch runs a Coordinator on the same swarm node.
 */
import { Coordinator, DEFAULT_RUN_SETTINGS, collabOptionsOf, joinPeerIds, latestLeaderboard, resolveRunSettings, type CollaborativeOptions, type RunSettings } from '../collab/index.js';
import type { Config } from '../config/settings.js';
import type { Logger } from '../log/logger.js';
import type { NodeReachability } from '../shared/api.js';
import type { Store } from '../store/index.js';
import { createSwarmNode, type SwarmNode } from '../swarm/index.js';
import type { TrainingEvent } from './events.js';
import { MemoryLimitError, type WatchdogOptions } from './memory-limit.js';
import { trainerSettings } from './options.js';
import type { CoordinatorRole, FoundLeaderboard, MakeNodeParts, SwarmPresence, TrainingService, TrainingSettings } from './service.js';
import { SoloTraining } from './solo.js';
import { ownRunData } from './run-data.js';
import { runSwarmPeer } from './swarm-peer.js';

export interface VolunteerOptions extends WatchdogOptions {
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** Run id of a swarm this node starts itself (coordinator on, no join code). @default 'cohort-albert' */
  readonly runId?: string;
  /** The run this node founds (coordinator on, no join code); a swarm it joins has its own. @default DEFAULT_RUN_SETTINGS */
  readonly run?: Partial<RunSettings>;
  /** This node's micro-batch. @default DEFAULT_LOCAL_TRAINER's */
  readonly batchSize?: number;
  /** This peer's own optimizer options (timeouts, group size, delays). */
  readonly optimizer?: Partial<Pick<CollaborativeOptions, 'matchmakingTime' | 'averagingTimeout' | 'targetGroupSize' | 'delayGradAveraging' | 'delayOptimizerStep'>>;
  readonly listen?: readonly string[];
}

/** How often the dashboard's leaderboard is looked up on the swarm (coordinators publish theirs about as often). */
const LEADERBOARD_REFRESH_MS = 30_000;

/**
 * One swarm node per process, shared by Start's training and the coordinator switch; while it
 * runs, the newest coordinator leaderboard is looked up in the background for the dashboard.
 */
export class SharedSwarm implements SwarmPresence {
  private node: Promise<SwarmNode> | undefined;
  /** The node once started, for the synchronous reads. */
  private started: SwarmNode | undefined;
  private users = 0;
  private board: FoundLeaderboard | null = null;
  private boardTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: VolunteerOptions) {}

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

export class VolunteerTraining implements TrainingService {
  private settings: TrainingSettings | undefined;
  private readonly listeners = new Set<(e: TrainingEvent) => void>();
  private readonly solo: SoloTraining;
  private mode: 'swarm' | 'solo' | undefined;
  private loop: Promise<void> | undefined;
  private abort: AbortController | undefined;

  constructor(
    private readonly o: VolunteerOptions,
    private readonly swarm: SharedSwarm,
  ) {
    this.solo = new SoloTraining({ store: o.store, dataDir: o.dataDir, log: o.log, trainer: trainerSettings(foundingRunSettings(o), { batchSize: o.batchSize }), ...watchdogOptions(o) });
    this.solo.subscribe((e) => this.emit(e));
  }

  /** The join code the volunteer configured (empty: none). */
  get joinCode(): string | undefined {
    return this.settings?.joinCode?.trim() || undefined;
  }

  configure(settings: TrainingSettings): void {
    this.settings = settings;
    this.solo.configure(settings);
  }

  async start(): Promise<void> {
    if (this.mode) return;
    const joinCode = this.joinCode;
    if (!joinCode) {
      this.o.log.info('no swarm configured (set a join code to train with volunteers): training alone');
      return this.startSolo();
    }
    let node: SwarmNode;
    try {
      node = await this.swarm.acquire(joinCode);
      const report = await node.ready;
      if (report.connected.length === 0) {
        await this.swarm.release();
        this.o.log.warn(`could not reach any peer of the join code's swarm: ${report.failed.map((f) => `${f.addr}: ${f.error}`).join('; ') || 'none answered'}; training alone until the next start`);
        return this.startSolo();
      }
    } catch (err) {
      this.o.log.warn(`could not join the swarm: ${(err as Error).message}; training alone until the next start`);
      return this.startSolo();
    }
    const { settings: run, data } = await resolveRunSettings(node, { own: foundingRunSettings(this.o), joinPeers: joinPeerIds(joinCode), log: this.o.log });
    this.mode = 'swarm';
    this.abort = new AbortController();
    const policies = this.settings?.policies;
    this.loop = runSwarmPeer({
      node,
      store: this.o.store,
      dataDir: this.o.dataDir,
      log: this.o.log,
      trainer: trainerSettings(run, { batchSize: this.o.batchSize, precision: policies?.precision }),
      threads: policies?.maxCpuThreads,
      memoryLimitMiB: policies?.maxMemoryMiB ?? trainerSettings().maxMemoryMiB,
      ...watchdogOptions(this.o),
      provider: policies?.useGpu === false ? 'cpu' : 'auto',
      signal: this.abort.signal,
      data,
      collab: { ...this.o.optimizer, ...collabOptionsOf(run), displayName: this.settings?.displayName || undefined, uploadLimit: policies?.bandwidthCapKiBps ? policies.bandwidthCapKiBps * 1024 : undefined },
      emit: (e) => this.emit(e),
    })
      .then(() => undefined)
      .catch((err: unknown) => {
        if (!(err instanceof MemoryLimitError)) return this.o.log.error(`collaborative training stopped: ${(err as Error).message}`);
        this.emit({ type: 'halted', reason: err.message, at: Date.now() });
      })
      .finally(async () => {
        this.mode = undefined;
        this.loop = undefined;
        await this.swarm.release();
      });
  }

  async pause(): Promise<void> {
    if (this.mode === 'solo') {
      await this.solo.pause();
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

  private async startSolo(): Promise<void> {
    this.mode = 'solo';
    await this.solo.start();
  }

  private emit(event: TrainingEvent): void {
    for (const l of this.listeners) l(event);
  }
}

function watchdogOptions(o: VolunteerOptions): WatchdogOptions {
  return { ...(o.memoryProbe ? { memoryProbe: o.memoryProbe } : {}), ...(o.watchdogIntervalMs ? { watchdogIntervalMs: o.watchdogIntervalMs } : {}) };
}

/** The dashboard's coordinator switch: a Coordinator on this node's swarm node. */
export class SwarmCoordinatorRole implements CoordinatorRole {
  private coordinator: Coordinator | undefined;

  constructor(
    private readonly o: VolunteerOptions,
    private readonly swarm: SharedSwarm,
    private readonly joinCode: () => string | undefined,
  ) {}

  async start(): Promise<{ joinCode: string; multiaddrs: readonly string[] }> {
    const joinCode = this.joinCode();
    const node = await this.swarm.acquire(joinCode);
    await node.ready;
    const { settings: run } = await resolveRunSettings(node, { own: foundingRunSettings(this.o), ownData: ownRunData(this.o.store), joinPeers: joinCode === undefined ? undefined : joinPeerIds(joinCode), log: this.o.log });
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

/** The run settings this node publishes when it founds the swarm. */
function foundingRunSettings(o: VolunteerOptions): RunSettings {
  return { ...DEFAULT_RUN_SETTINGS, ...o.run };
}

/**
 * The parts both hosts (headless CLI, desktop utility process) attach: Start trains (with the swarm
 * of the configured join code, or alone), the coordinator switch, sharing one swarm node.
 */
export function volunteerParts(config: Pick<Config, 'dataDir' | 'training'>): MakeNodeParts {
  return ({ log, store }) => {
    if (config.training !== 'local') return {};
    const options = { store, log, dataDir: config.dataDir };
    const swarm = new SharedSwarm(options);
    const training = new VolunteerTraining(options, swarm);
    return { training, coordinator: new SwarmCoordinatorRole(options, swarm, () => training.joinCode), swarm };
  };
}
