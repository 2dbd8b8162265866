import { EventEmitter } from 'node:events';
import path from 'node:path';
import { z } from 'zod';
import type { Logger } from '../log/logger.js';
import {
  AppSettingsSchema,
  DEFAULT_SETTINGS,
  RESTART_POLICIES,
  applySettingsPatch,
  type AppSettings,
  type CohortCalls,
  type ContributionStatus,
  type CoordinatorStatus,
  type CoordinatorToggle,
  type LogLine,
  type LogQuery,
  type Result,
  type SeriesData,
  type SeriesQuery,
  type SettingsPatch,
  type Snapshot,
  type DataStatus,
  type SwarmDescription,
  type SwarmState,
  type JoinCodeQuery,
} from '../shared/api.js';
import type { Store } from '../store/index.js';
import { ContributionMachine, type StopReason } from './contribution-machine.js';
import { withLeaderboard } from './leaderboard-view.js';
import { LogRing } from './log-ring.js';
import { teeLogger } from './log-tee.js';
import type { TrainingEvent } from '../training/events.js';
import type { CoordinatorRole, NodeParts, TrainingService, TrainingSettings } from '../training/service.js';
import { swarmStateUpdate } from '../training/sink.js';
import { describeJoinCode } from '../training/swarm-target.js';
import { StoreView } from './store-view.js';

const SETTINGS_KEY = 'app.settings';
const INTENT_KEY = 'app.contributing';
/** Why training last stopped itself; kept so a restart still says why instead of "paused by you". */
const STOPPED_KEY = 'app.stopped';
const StopReasonSchema = z.strictObject({ cause: z.enum(['memory', 'error']), reason: z.string() });

/** The training parts (NodeParts) are absent on a node with training off. */
export interface NodeControllerInit extends NodeParts {
  readonly store: Store;
  /** The node's logger; every line it writes also goes to the dashboard's log panel. */
  readonly log: Logger;
  /**
   * The log panel's ring, when the caller has already teed its logger into it (`teeLogger`) so that
   * node parts made before the controller log into the panel too. @default a new ring, teed here
   */
  readonly logs?: LogRing;
  readonly version: string;
  /** The licence the About panel names. @default 'Apache-2.0' */
  readonly licence?: string;
  /** The folder of the node's log file, where it writes one (the desktop app). */
  readonly logDir?: string;
  /** How often the store is re-read for numbers the training side recorded. @default 1000 */
  readonly refreshMs?: number;
}

/**
 * The node runtime as the UIs see it: both the headless dashboard server and Electron main call this
 * (directly or over a message port). It owns the contribution state machine, the settings, the log
 * ring and the coordinator toggle, and reads the numbers the training side records in the store.
 */
export class NodeController implements CohortCalls {
  private readonly store: Store;
  private readonly log: Logger;
  private readonly view: StoreView;
  private readonly logs: LogRing;
  private readonly events = new EventEmitter();
  private readonly machine: ContributionMachine;
  private readonly training: TrainingService | undefined;
  private readonly coordinatorRole: CoordinatorRole | undefined;
  private readonly unsubscribeTraining: (() => void) | undefined;
  private readonly timer: NodeJS.Timeout;
  private settings: AppSettings;
  private coordinator: CoordinatorStatus;
  private liveSwarm: { swarm: Partial<SwarmState>; at: number } | undefined;
  /** The run data's fetch and a refusal for other data, as the training events last told them (until the next Start). */
  private data: DataStatus = { fetch: null, mismatch: null };
  /** Why this Start trains on this machine alone (not with a swarm); undefined: with a swarm, or not decided yet. */
  private alone: string | undefined;
  private last: Snapshot;
  private lastJson: string;

  constructor(private readonly init: NodeControllerInit) {
    this.store = init.store;
    this.logs = init.logs ?? new LogRing();
    this.log = init.logs ? init.log : teeLogger(init.log, this.logs);
    this.view = new StoreView(init.store);
    this.training = init.training;
    this.coordinatorRole = init.coordinator;
    this.settings = this.loadSettings();
    const wasContributing = this.store.settings.get(INTENT_KEY, z.boolean());
    const limitation = init.training ? undefined : 'nothing is computed: training is off on this node (--training off)';
    const stopped = wasContributing === false ? this.store.settings.get(STOPPED_KEY, StopReasonSchema.nullable()) : undefined;
    this.machine = new ContributionMachine(wasContributing === undefined ? 'never-started' : wasContributing ? 'contribute' : 'paused', limitation, Date.now(), stopped ?? undefined);
    this.coordinator = init.coordinator
      ? { available: true, enabled: false }
      : { available: false, enabled: false, reason: 'coordinator mode needs the swarm, which is off on this node (--training off)' };
    this.unsubscribeTraining = init.training?.subscribe((e) => this.onTrainingEvent(e));
    init.training?.configure(trainingSettings(this.settings));
    this.last = this.buildSnapshot();
    this.lastJson = JSON.stringify(this.last);
    this.timer = setInterval(() => this.refresh(), init.refreshMs ?? 1000);
    this.timer.unref();
    if (this.machine.status.phase === 'running') this.applyToTraining(false);
  }

  /** Called with every changed snapshot; returns the unsubscribe function. */
  subscribe(listener: (snapshot: Snapshot) => void): () => void {
    this.events.on('snapshot', listener);
    return () => this.events.off('snapshot', listener);
  }

  async getSnapshot(): Promise<Snapshot> {
    return this.last;
  }

  async getSeries(query: SeriesQuery): Promise<SeriesData> {
    return this.view.series(query.series, query.since);
  }

  async getLogs(query: LogQuery): Promise<LogLine[]> {
    return this.logs.after(query.after);
  }

  async getSettings(): Promise<AppSettings> {
    return this.settings;
  }

  async updateSettings(patch: SettingsPatch): Promise<Result<AppSettings>> {
    let next: AppSettings;
    try {
      next = applySettingsPatch(this.settings, patch);
      if (next.joinCode !== '') describeJoinCode(next.joinCode);
    } catch (err) {
      return { ok: false, error: `settings rejected: ${(err as Error).message}` };
    }
    this.store.settings.set(SETTINGS_KEY, next, AppSettingsSchema);
    const changed = Object.keys(patch).filter((k) => JSON.stringify(next[k as keyof AppSettings]) !== JSON.stringify(this.settings[k as keyof AppSettings]));
    const trainingChanged = JSON.stringify(trainingSettings(next)) !== JSON.stringify(trainingSettings(this.settings));
    const swarmChanged = next.joinCode !== this.settings.joinCode;
    const engineChanged = RESTART_POLICIES.filter((k) => next.policies[k] !== this.settings.policies[k]);
    this.settings = next;
    if (trainingChanged) this.training?.configure(trainingSettings(next));
    if (changed.length > 0) this.log.info(`settings changed: ${changed.join(', ')}`);
    if (this.machine.status.phase === 'running' && (swarmChanged || engineChanged.length > 0)) {
      this.restartTraining(swarmChanged ? 'the join code changed: restarting contribution on the new swarm' : `restarting contribution to apply ${engineChanged.join(', ')}`);
    }
    this.refresh();
    return { ok: true, value: next };
  }

  async openLogFolder(): Promise<Result<null>> {
    return { ok: false, error: 'this node logs to its stderr (run by a service manager: its journal); only the desktop app keeps a log folder' };
  }

  async moveDatabaseAside(): Promise<Result<null>> {
    return { ok: false, error: 'this node opened its database: there is nothing to move aside' };
  }

  async describeJoinCode(query: JoinCodeQuery): Promise<Result<SwarmDescription>> {
    const code = query.code.trim();
    if (code === '') return { ok: false, error: 'no join code: paste the code a coordinator gave you (it starts with "cohort:")' };
    try {
      return { ok: true, value: describeJoinCode(code) };
    } catch (err) {
      return { ok: false, error: (err as Error).message };
    }
  }

  async startContribution(): Promise<Result<ContributionStatus>> {
    return this.setIntent(true);
  }

  async pauseContribution(): Promise<Result<ContributionStatus>> {
    return this.setIntent(false);
  }

  async setCoordinator(toggle: CoordinatorToggle): Promise<Result<CoordinatorStatus>> {
    const role = this.coordinatorRole;
    if (!role) return { ok: false, error: this.coordinator.available ? 'coordinator mode is unavailable' : this.coordinator.reason };
    if (toggle.enabled === this.coordinator.enabled) return { ok: true, value: this.coordinator };
    try {
      if (toggle.enabled) {
        const { joinCode, multiaddrs } = await role.start();
        this.coordinator = { available: true, enabled: true, joinCode, multiaddrs };
        this.log.info(`coordinator mode on; join code ${joinCode}`);
        // Start found no swarm: the node now has one, the run it coordinates (a trainer in a swarm stays there: the switch joined it)
        if (this.alone !== undefined && this.machine.status.phase === 'running') this.restartTraining('training moves from this machine alone into the run this node coordinates');
      } else {
        await role.stop();
        this.coordinator = { available: true, enabled: false };
        this.log.info('coordinator mode off');
      }
    } catch (err) {
      const error = `coordinator mode could not be turned ${toggle.enabled ? 'on' : 'off'}: ${(err as Error).message}`;
      this.log.error(error);
      return { ok: false, error };
    }
    this.refresh();
    return { ok: true, value: this.coordinator };
  }

  /**
   * A policy (battery, machine in use) holds or releases contribution; `reason` undefined releases.
   * Not part of the UI API: only the desktop shell's policy monitor calls it.
   */
  setPolicyHold(reason: string | undefined): void {
    const wasRunning = this.machine.status.phase === 'running';
    if (!this.machine.update({ hold: reason })) return;
    this.log.info(reason === undefined ? 'policy hold released' : `holding contribution: ${reason}`);
    this.applyToTraining(wasRunning);
    this.refresh();
  }

  /** Stops polling and waits for training to pause (it checkpoints) and the coordinator role to stop. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribeTraining?.();
    this.events.removeAllListeners();
    await Promise.all([this.machine.status.phase === 'running' ? this.training?.pause() : undefined, this.coordinator.enabled ? this.coordinatorRole?.stop() : undefined]);
  }

  /** Re-reads the store and pushes a snapshot if anything visible changed. */
  refresh(): void {
    const next = this.buildSnapshot();
    const json = JSON.stringify(next);
    if (json === this.lastJson) return;
    this.last = next;
    this.lastJson = json;
    this.events.emit('snapshot', next);
  }

  private setIntent(contribute: boolean, stopped?: StopReason): Result<ContributionStatus> {
    const wasRunning = this.machine.status.phase === 'running';
    this.machine.update({ intent: contribute ? 'contribute' : 'paused', stopped });
    // a new Start fetches and matches again: what the last one saw is stale
    if (contribute) this.data = { fetch: null, mismatch: null };
    this.store.settings.set(INTENT_KEY, contribute, z.boolean());
    this.store.settings.set(STOPPED_KEY, stopped ?? null, StopReasonSchema.nullable());
    if (contribute && !this.settings.firstRunDone) {
      this.settings = { ...this.settings, firstRunDone: true };
      this.store.settings.set(SETTINGS_KEY, this.settings, AppSettingsSchema);
    }
    if (stopped === undefined) this.log.info(contribute ? `contribution started (${this.machine.status.detail})` : 'contribution paused by the volunteer');
    this.applyToTraining(wasRunning);
    this.refresh();
    return { ok: true, value: this.machine.status };
  }

  /** Starts or pauses training when the phase crosses into or out of `running`. */
  private applyToTraining(wasRunning: boolean): void {
    const running = this.machine.status.phase === 'running';
    if (!this.training || running === wasRunning) return;
    // each start decides again whether it trains with a swarm
    this.alone = undefined;
    (running ? this.training.start() : this.training.pause()).catch((err: unknown) => this.log.error(`training could not ${running ? 'start' : 'pause'}: ${(err as Error).message}`));
  }

  /** The swarm or what training reads as it starts changed while training: pause (it checkpoints) and start again; `why` is logged. */
  private restartTraining(why: string): void {
    const training = this.training;
    if (!training) return;
    this.log.info(why);
    this.alone = undefined;
    training
      .pause()
      .then(() => (this.machine.status.phase === 'running' ? training.start() : undefined))
      .catch((err: unknown) => this.log.error(`training could not restart: ${(err as Error).message}`));
  }

  private onTrainingEvent(event: TrainingEvent): void {
    if (event.type === 'halted') {
      // training stopped itself; it stays stopped (across restarts too) until the volunteer's Start
      if (this.machine.intent === 'contribute') this.setIntent(false, { cause: event.cause, reason: event.reason });
      return;
    }
    if (event.type === 'alone' || event.type === 'joined') {
      this.alone = event.type === 'alone' ? event.reason : undefined;
      return this.refresh();
    }
    if (event.type === 'data-fetch' || event.type === 'data-mismatch') {
      this.data = event.type === 'data-fetch' ? { ...this.data, fetch: { ...event.progress, at: event.at } } : { ...this.data, mismatch: { reason: event.reason, advice: event.advice, at: event.at } };
      return this.refresh();
    }
    const update = swarmStateUpdate(event);
    if (!update) return;
    this.liveSwarm = { swarm: update, at: event.at };
    this.refresh();
  }

  private loadSettings(): AppSettings {
    try {
      return this.store.settings.get(SETTINGS_KEY, AppSettingsSchema) ?? DEFAULT_SETTINGS;
    } catch (err) {
      this.log.warn(`${(err as Error).message}; using the default settings`);
      return DEFAULT_SETTINGS;
    }
  }

  private buildSnapshot(): Snapshot {
    const stored = this.view.swarm();
    const live = this.liveSwarm;
    const numbers = live && (stored.updatedAt === null || live.at >= stored.updatedAt) ? { ...stored, ...live.swarm, updatedAt: live.at } : stored;
    const swarm: SwarmState = { ...numbers, reachability: this.init.swarm?.reachability() ?? null };
    return {
      version: this.init.version,
      // "Contributing" alone would tell a volunteer who pasted a code that they train with its swarm
      contribution: this.alone !== undefined && this.machine.status.phase === 'running' ? { ...this.machine.status, detail: `training on this machine alone: ${this.alone}` } : this.machine.status,
      mine: withLeaderboard(this.view.mine(), this.init.swarm?.leaderboard() ?? null, this.settings.displayName.trim() || (this.init.swarm?.peerId() ?? null)),
      swarm,
      coordinator: this.coordinator,
      peers: this.view.peers(Date.now(), this.init.swarm?.connectedPeers() ?? []),
      lastLogSeq: this.logs.lastSeq,
      data: this.data,
      notices: this.init.swarm?.notices() ?? [],
      firstRunDone: this.settings.firstRunDone,
      defaultSwarm: this.init.defaultSwarm ?? null,
      about: { version: this.init.version, licence: this.init.licence ?? 'Apache-2.0', dataDir: path.dirname(this.store.file), logDir: this.init.logDir ?? null },
    };
  }
}

function trainingSettings(s: AppSettings): TrainingSettings {
  return { policies: s.policies, joinCode: s.joinCode, displayName: s.displayName };
}
