/**
 * What Start and the coordinator switch do in the app and the headless node: with a join code (or,
 * without one, the node's default run), train with that swarm (adopting its run settings); without
 * either, or when the swarm cannot be reached, train alone and say so. The coordinator switch runs a
 * Coordinator on the same swarm node; while it is on, Start trains in the run it coordinates.
 */
import { Coordinator, DEFAULT_RUN_SETTINGS, collabOptionsOf, joinPeerIds, latestLeaderboard, keptRunRecord, resolveRunParams, RunRecordUnavailableError, runSettingsOf, type CollaborativeOptions, type RunParams, type RunSettings } from '../collab/index.js';
import type { Config } from '../config/settings.js';
import type { Logger } from '../log/logger.js';
import type { NodeReachability, Notice } from '../shared/api.js';
import type { Store } from '../store/index.js';
import { createSwarmNode, type SwarmNode } from '../swarm/index.js';
import type { TrainingEvent } from './events.js';
import { MemoryLimitError, type WatchdogOptions } from './memory-limit.js';
import { trainerSettings } from './options.js';
import type { CoordinatorRole, FoundLeaderboard, MakeNodeParts, SwarmPresence, TrainingService, TrainingSettings } from './service.js';
import { SoloTraining } from './solo.js';
import { ownRunData } from './run-data.js';
import { runSwarmPeer } from './swarm-peer.js';
import { DEFAULT_RUN_ID, defaultSwarmTarget, describeSwarm, swarmInitOf, type SwarmTarget } from './swarm-target.js';

export interface VolunteerOptions extends WatchdogOptions {
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** Run id of a swarm this node starts itself (coordinator on, no join code). @default DEFAULT_RUN_ID */
  readonly runId?: string;
  /** The swarm an empty join code joins (the node's default run); absent: an empty code trains alone. */
  readonly defaultSwarm?: SwarmTarget;
  /** The run this node founds (coordinator on, no join code); a swarm it joins has its own. @default DEFAULT_RUN_SETTINGS */
  readonly run?: Partial<RunSettings>;
  /** This node's micro-batch. @default DEFAULT_LOCAL_TRAINER's */
  readonly batchSize?: number;
  /** This peer's own optimizer options (timeouts, group size, delays). */
  readonly optimizer?: Partial<Pick<CollaborativeOptions, 'matchmakingTime' | 'averagingTimeout' | 'targetGroupSize' | 'delayGradAveraging' | 'delayOptimizerStep'>>;
  readonly listen?: readonly string[];
  /**
   * After Start could not reach the swarm it was given (and trains alone meanwhile), it tries again after
   * this long, doubling up to MAX_SWARM_RETRY_MS. @default 30 000
   */
  readonly swarmRetryMs?: number;
}

/** The run of the coordinator on this node: its record, the peers of the code it joined by (none: it founded it), and how it hands the state serving to a trainer and takes it back. */
export interface CoordinatedRun {
  readonly record: RunParams;
  readonly joinPeers: string[] | undefined;
  yieldState(): Promise<void>;
  trainerStopped(): Promise<void>;
}

/** How often the dashboard's leaderboard is looked up on the swarm (coordinators publish theirs about as often). */
const LEADERBOARD_REFRESH_MS = 30_000;
/** The first wait before Start tries an unreachable swarm again, and the longest (BOINC and Folding@home back off the same way). */
const SWARM_RETRY_MS = 30_000;
const MAX_SWARM_RETRY_MS = 10 * 60_000;

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
  /** The run the coordinator switch runs on this node while it is on: Start trains in it. */
  coordinated: CoordinatedRun | undefined;
  /** Start trains in this node's swarm: the run's state is the trainer's to serve. */
  training = false;

  constructor(private readonly o: VolunteerOptions) {}

  /** The node for `target` (or a new swarm when there is none); the first caller decides. */
  async acquire(target: SwarmTarget | undefined): Promise<SwarmNode> {
    this.users++;
    this.node ??= createSwarmNode({ ...(target ? swarmInitOf(target) : { runId: this.o.runId ?? DEFAULT_RUN_ID }), ...(this.o.listen ? { listen: this.o.listen } : {}), log: this.o.log }, this.o.store);
    try {
      const node = await this.node;
      if (this.started !== node) {
        this.started = node;
        this.watchLeaderboard(node, target ? joinPeerIds(target.initialPeers) : []);
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

  connectedPeers(): readonly string[] {
    return this.started?.libp2p.getConnections().map((c) => c.remotePeer.toString()) ?? [];
  }

  notices(): readonly Notice[] {
    return this.started?.notices.shown() ?? [];
  }

  /** `trusted`: the join code's peers, whose board is shown before any other (latestLeaderboard). */
  private watchLeaderboard(node: SwarmNode, trusted: readonly string[]): void {
    clearInterval(this.boardTimer);
    let looking = false;
    const look = (): void => {
      if (looking) return; // a slow DHT lookup is not stacked on
      looking = true;
      latestLeaderboard(node, trusted)
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
  /** Counts pauses, so that a start or a swarm retry that a pause overtook does nothing. */
  private generation = 0;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly o: VolunteerOptions,
    private readonly swarm: SharedSwarm,
  ) {
    this.solo = new SoloTraining({ store: o.store, dataDir: o.dataDir, log: o.log, trainer: trainerSettings(foundingRunSettings(o), { batchSize: o.batchSize }), memoryProbe: o.memoryProbe, watchdogIntervalMs: o.watchdogIntervalMs });
    this.solo.subscribe((e) => this.emit(e));
  }

  /** The swarm Start joins: the volunteer's join code, else the node's default run; undefined: none. */
  get target(): SwarmTarget | undefined {
    const code = this.settings?.joinCode?.trim();
    return code ? { initialPeers: [code] } : this.o.defaultSwarm;
  }

  configure(settings: TrainingSettings): void {
    this.settings = settings;
    this.solo.configure(settings);
  }

  async start(): Promise<void> {
    if (this.mode) return;
    // the coordinator switch is on: this node is in its run already, which Start trains in (whatever the code)
    const coordinated = this.swarm.coordinated;
    if (coordinated) {
      const node = await this.swarm.acquire(undefined);
      this.o.log.info(`training in the run "${node.runId}" this node coordinates`);
      const named = this.target && runIdOf(this.target);
      if (named !== undefined && named !== node.runId) {
        const text = `The coordinator switch is on, so Start trains in the run "${node.runId}" this node coordinates, not in "${named}" of the join code in Settings. To train with that swarm, turn the coordinator switch off, then Pause and Start.`;
        if (node.notices.first(`coordinated-run ${named}`, { kind: 'coordinated-run', text })) this.o.log.warn(text);
      }
      return this.trainWithSwarm(node, coordinated.record, coordinated.joinPeers);
    }
    const target = this.target;
    if (!target) {
      this.o.log.info('no swarm configured (set a join code to train with volunteers): training alone');
      return this.startSolo('no join code set');
    }
    const generation = this.generation;
    const joined = await this.reach(target);
    if (generation !== this.generation) return joined.node ? this.swarm.release() : undefined;
    if (!joined.node) return this.startSoloAndRetry(target, joined.reason, this.o.swarmRetryMs ?? SWARM_RETRY_MS);
    return this.trainWithSwarm(joined.node, joined.record, joined.joinPeers);
  }

  /** The swarm node of `target`, held, with its run record and the join code's peers; or why it cannot be trained with (nothing held). */
  private async reach(target: SwarmTarget): Promise<{ node: SwarmNode; record: RunParams; joinPeers: string[]; reason?: never } | { node?: never; reason: string }> {
    let node: SwarmNode;
    try {
      node = await this.swarm.acquire(target);
    } catch (err) {
      return { reason: `could not join the swarm: ${(err as Error).message}` };
    }
    try {
      const reason = await unreachable(node);
      if (reason !== undefined) {
        await this.swarm.release();
        return { reason };
      }
    } catch (err) {
      await this.swarm.release();
      return { reason: `could not join the swarm: ${(err as Error).message}` };
    }
    // the record this data directory keeps: found again when the swarm has lost it, and kept for the next start
    try {
      const joinPeers = joinPeerIds(target.initialPeers);
      return { node, joinPeers, record: await resolveRunParams(node, { own: foundingRunSettings(this.o), joinPeers, ...keptRunRecord(this.o.store, node.runId), log: this.o.log }) };
    } catch (err) {
      await this.swarm.release();
      // never in the swarm on settings that are not the run's
      if (!(err instanceof RunRecordUnavailableError)) throw err;
      return { reason: err.message };
    }
  }

  /** Trains alone and tries the swarm again after `delayMs` (then twice as long, up to MAX_SWARM_RETRY_MS), moving to it once it answers. */
  private async startSoloAndRetry(target: SwarmTarget, reason: string, delayMs: number): Promise<void> {
    const generation = this.generation;
    this.o.log.warn(`${reason}; training alone, trying the swarm again in ${Math.round(delayMs / 1000)} s`);
    if (this.mode !== 'solo') await this.startSolo(`${reason} (Cohort tries the swarm again from time to time)`);
    if (generation !== this.generation) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.reach(target)
        .then(async (joined) => {
          if (generation !== this.generation) return joined.node ? this.swarm.release() : undefined;
          if (!joined.node) return this.startSoloAndRetry(target, joined.reason, Math.min(delayMs * 2, MAX_SWARM_RETRY_MS));
          this.o.log.info(`the swarm "${joined.node.runId}" answers: leaving training alone to train with it`);
          await this.solo.pause();
          this.mode = undefined;
          if (generation !== this.generation) return this.swarm.release();
          return this.trainWithSwarm(joined.node, joined.record, joined.joinPeers);
        })
        .catch((err: unknown) => this.emit({ type: 'halted', cause: 'error', reason: `could not move to the swarm: ${(err as Error).message}`, at: Date.now() }));
    }, delayMs);
    this.retry.unref();
  }

  /** Trains in the swarm of `node` (held: released when training ends) on the run `record`; `joinPeers`: the peers of the code it joined by (none: this node founded the run). */
  private trainWithSwarm(node: SwarmNode, record: RunParams, joinPeers: string[] | undefined): void {
    const run = runSettingsOf(record);
    this.o.log.info(`training with the swarm "${node.runId}"`);
    this.emit({ type: 'joined', runId: node.runId, at: Date.now() });
    this.mode = 'swarm';
    this.swarm.training = true;
    const abort = new AbortController();
    this.abort = abort;
    const policies = this.settings?.policies;
    // a coordinator on this node serving its last checkpoint hands the serving over first (a node serves one state per prefix)
    this.loop = (this.swarm.coordinated?.yieldState() ?? Promise.resolve()).then(() => runSwarmPeer({
      node,
      store: this.o.store,
      dataDir: this.o.dataDir,
      log: this.o.log,
      trainer: trainerSettings(run, { batchSize: this.o.batchSize, precision: policies?.precision }),
      threads: policies?.maxCpuThreads,
      memoryLimitMiB: policies?.maxMemoryMiB ?? trainerSettings().maxMemoryMiB,
      memoryProbe: this.o.memoryProbe,
      watchdogIntervalMs: this.o.watchdogIntervalMs,
      provider: policies?.useGpu === false ? 'cpu' : 'auto',
      signal: abort.signal,
      data: record.data,
      run: record,
      collab: { ...this.o.optimizer, ...collabOptionsOf(run), displayName: this.settings?.displayName || undefined, uploadLimit: policies?.bandwidthCapKiBps ? policies.bandwidthCapKiBps * 1024 : undefined, trustedPeers: joinPeers },
      emit: (e) => this.emit(e),
    }))
      .then(() => undefined)
      .catch((err: unknown) => {
        if (err instanceof MemoryLimitError) return this.emit({ type: 'halted', cause: 'memory', reason: err.message, at: Date.now() });
        const reason = `collaborative training stopped: ${(err as Error).message}`;
        // a failure while winding down for a pause is the pause's, not a stop the volunteer must act on
        if (abort.signal.aborted) return this.o.log.warn(reason);
        this.emit({ type: 'halted', cause: 'error', reason, at: Date.now() });
      })
      .finally(async () => {
        this.swarm.training = false;
        // paused with the switch on: its coordinator serves the run's newest state (the one just saved) to newcomers
        await this.swarm.coordinated?.trainerStopped();
        this.mode = undefined;
        this.loop = undefined;
        await this.swarm.release();
      });
  }

  async pause(): Promise<void> {
    // a start or a retry still on its way sees the new generation and stands down
    this.generation++;
    clearTimeout(this.retry);
    this.retry = undefined;
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

  /** Trains on this machine alone; the dashboard's state says so, and why. */
  private async startSolo(reason: string): Promise<void> {
    this.emit({ type: 'alone', reason, at: Date.now() });
    this.mode = 'solo';
    await this.solo.start();
  }

  private emit(event: TrainingEvent): void {
    for (const l of this.listeners) l(event);
  }
}

/** The dashboard's coordinator switch: a Coordinator on this node's swarm node (as `cohort run --coordinator`). */
export class SwarmCoordinatorRole implements CoordinatorRole {
  private coordinator: Coordinator | undefined;

  constructor(
    private readonly o: VolunteerOptions,
    private readonly swarm: SharedSwarm,
    private readonly target: () => SwarmTarget | undefined,
  ) {}

  async start(): Promise<{ joinCode: string; multiaddrs: readonly string[] }> {
    const target = this.target();
    const node = await this.swarm.acquire(target);
    // the node's own code (the app restarted with it in Settings) names no other peer: it founds, as with none
    const others = target === undefined ? [] : joinPeerIds(target.initialPeers).filter((p) => p !== node.peerId.toString());
    const joinPeers = others.length > 0 ? others : undefined;
    try {
      if (joinPeers === undefined) await node.ready;
      else {
        // a coordinator of a swarm nobody answers for would wait minutes for its run record, then fail
        const reason = await unreachable(node);
        if (reason !== undefined) throw new Error(`${reason}. A coordinator serves the swarm of the join code in Settings: clear the code there to start a swarm of your own`);
      }
      const record = await resolveRunParams(node, { own: foundingRunSettings(this.o), ownData: ownRunData(this.o.store), joinPeers, ...keptRunRecord(this.o.store, node.runId), log: this.o.log });
      const coordinator = new Coordinator({ node, store: this.o.store, dataDir: this.o.dataDir, log: this.o.log, targetBatchSize: runSettingsOf(record).targetBatchSize, run: record, trainerBeside: this.swarm.training });
      this.coordinator = coordinator;
      coordinator.start();
      this.swarm.coordinated = { record, joinPeers, yieldState: () => coordinator.yieldState(), trainerStopped: () => coordinator.trainerStopped() };
    } catch (err) {
      await this.swarm.release();
      throw err;
    }
    return { joinCode: node.joinCode(), multiaddrs: node.multiaddrs() };
  }

  /** A trainer in the run goes on without it: it holds the node, so the run's join code stays valid while it trains. */
  async stop(): Promise<void> {
    const running = this.coordinator;
    if (!running) return;
    this.coordinator = undefined;
    this.swarm.coordinated = undefined;
    await running.stop();
    await this.swarm.release();
  }
}

/** Why no peer of the swarm `node` was started for answers, once its first dials are done; undefined when one does. */
async function unreachable(node: SwarmNode): Promise<string | undefined> {
  const report = await node.ready;
  // a node that found nobody at first redials its initial peers: a later look counts those too
  if (report.connected.length > 0 || node.libp2p.getConnections().length > 0) return undefined;
  return `could not reach any peer of the join code's swarm: ${report.failed.map((f) => `${f.addr}: ${f.error}`).join('; ') || 'none answered'}`;
}

/** The run id `target` names; undefined when it cannot be read (Settings says what is wrong with the code). */
function runIdOf(target: SwarmTarget): string | undefined {
  try {
    return describeSwarm(target).runId;
  } catch {
    return undefined;
  }
}

/** The run settings this node publishes when it founds the swarm. */
function foundingRunSettings(o: VolunteerOptions): RunSettings {
  return { ...DEFAULT_RUN_SETTINGS, ...o.run };
}

/**
 * The parts both hosts (headless CLI, desktop utility process) attach: Start trains (with the swarm
 * of the configured join code or the default run, or alone), the coordinator switch, sharing one swarm
 * node. The default run is the configured initial peers, else the build's `defaultSwarmFile`.
 */
export function volunteerParts(config: Pick<Config, 'dataDir' | 'training' | 'initialPeers'>, defaultSwarmFile?: string): MakeNodeParts {
  return ({ log, store }) => {
    if (config.training !== 'local') return {};
    const defaultSwarm = defaultSwarmTarget(config.initialPeers, defaultSwarmFile);
    const options = { store, log, dataDir: config.dataDir, ...(defaultSwarm ? { defaultSwarm } : {}) };
    const swarm = new SharedSwarm(options);
    const training = new VolunteerTraining(options, swarm);
    return { training, coordinator: new SwarmCoordinatorRole(options, swarm, () => training.target), swarm, ...(defaultSwarm ? { defaultSwarm: describeSwarm(defaultSwarm) } : {}) };
  };
}
