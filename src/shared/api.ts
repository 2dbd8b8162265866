/**
 * The one API between the node runtime and the UI. The Electron preload exposes it over IPC and
 * the headless node serves it over HTTP + Server-Sent Events; channels, paths and input checks are
 * all derived from the METHODS table below, never re-declared.
 */
import { z } from 'zod';
import { SettingsPatchSchema, type AppSettings, type SettingsPatch } from './settings-schema.js';

export * from './settings-schema.js';

/** Errors cross the boundary as values (Electron reduces thrown errors to a bare message). */
export type Result<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/**
 * Contribution state as the volunteer sees it:
 * - `stopped`: never started (first run) — nothing is computed
 * - `running`: contributing
 * - `waiting`: the volunteer wants to contribute but a policy holds it (on battery, machine in use, outside the schedule, snoozed)
 * - `paused`: paused by the volunteer; stays paused until they resume
 * - `halted`: training stopped itself at the memory limit; stays stopped until the volunteer's Start
 * - `error`: training stopped on an error; stays stopped until the volunteer's Start
 */
export const CONTRIBUTION_PHASES = ['stopped', 'running', 'waiting', 'paused', 'halted', 'error'] as const;
export type ContributionPhase = (typeof CONTRIBUTION_PHASES)[number];

export interface ContributionStatus {
  readonly phase: ContributionPhase;
  /** Why the node is waiting, or what limits it (e.g. the engine is not in this version). */
  readonly detail: string;
  readonly since: number;
}

/** One volunteer's credited contribution, as a coordinator's leaderboard lists it. */
export interface ContributorRow {
  /** Display name, else peer id. */
  readonly name: string;
  readonly samples: number;
  /** null when the coordinator did not report compute time. */
  readonly computeHours: number | null;
  /** Fraction (0..1) of the run's credited samples. */
  readonly share: number;
  readonly rank: number;
  /** This volunteer's row. */
  readonly me: boolean;
}

/** This volunteer's contribution to the run. */
export interface MyContribution {
  readonly samples: number;
  readonly computeHours: number;
  /**
   * Fraction (0..1) of all samples contributed to the run; null while nobody has contributed. From the
   * coordinator's leaderboard when it lists this volunteer, else from this node's own records.
   */
  readonly share: number | null;
  /** 1 = top contributor; null while this node has contributed nothing (or the leaderboard does not list it). */
  readonly rank: number | null;
  readonly contributors: number;
  /** This node's own throughput. */
  readonly samplesPerSecond: number | null;
  /** The top contributors a coordinator credited; null while no leaderboard is found on the swarm. */
  readonly leaderboard: { readonly rows: readonly ContributorRow[]; readonly updatedAt: number } | null;
}

/**
 * How other peers reach this node: `public` serves the DHT (accepts connections), `private` is a DHT
 * client reachable through relays, `unknown` is a DHT client until AutoNAT dial-backs decide.
 */
export const REACHABILITY_STATES = ['public', 'private', 'unknown'] as const;
export type NodeReachability = (typeof REACHABILITY_STATES)[number];

/** How a run averages, as the dashboard names it: gradients as they are, PowerSGD's low-rank factors, or DiLoCo's pseudo-gradient once per round of local steps. */
export const AVERAGING_MODES = ['plain', 'powersgd', 'diloco'] as const;
export type AveragingMode = (typeof AVERAGING_MODES)[number];
/** Each mode's name in the dashboard and the log. */
export const AVERAGING_MODE_NAMES: Readonly<Record<AveragingMode, string>> = { plain: 'plain', powersgd: 'PowerSGD', diloco: 'DiLoCo' };

/** The swarm's collaborative progress toward the next optimizer step. */
export interface SwarmState {
  readonly peersAlive: number | null;
  readonly samplesPerSecond: number | null;
  readonly epoch: number | null;
  /** Samples accumulated toward the current step. */
  readonly samplesAccumulated: number | null;
  readonly targetBatchSize: number | null;
  /** Seconds until the swarm reaches the target batch size. */
  readonly etaSeconds: number | null;
  readonly lastLoss: number | null;
  /** Seconds this node's main thread was busy during its latest all-reduce (its averaging's CPU cost), and per GB averaged. */
  readonly averagingBusySeconds: number | null;
  readonly averagingBusySecondsPerGb: number | null;
  /**
   * This node's averaging in its latest swarm epoch (`averagingEpoch`): the run's mode, the bytes it
   * sent in every all-reduce of the epoch (gradients or pseudo-gradient, both PowerSGD phases, state
   * averaging), and their compression (see epochCompression in src/training/sink.ts; null when the
   * epoch averaged nothing).
   */
  readonly averagingEpoch: number | null;
  readonly averagingMode: AveragingMode | null;
  readonly averagingBytesSent: number | null;
  readonly averagingCompression: number | null;
  /** When these numbers were last updated (ms since the epoch); null = never. */
  readonly updatedAt: number | null;
  /** This node's reachability in its swarm; null while it is in none (training alone, coordinator off). */
  readonly reachability: NodeReachability | null;
}

export type CoordinatorStatus =
  | { readonly available: false; readonly enabled: false; readonly reason: string }
  | { readonly available: true; readonly enabled: false }
  | { readonly available: true; readonly enabled: true; readonly joinCode: string; readonly multiaddrs: readonly string[] };

export interface PeerRow {
  readonly peerId: string;
  readonly samplesPerSecond: number | null;
  /** 'client' peers sit behind NAT and are reached through relays; 'relay' peers accept connections. */
  readonly mode: 'client' | 'relay' | 'unknown';
  readonly lastSeen: number;
  readonly alive: boolean;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface LogLine {
  /** Increasing sequence number, for incremental fetches. */
  readonly seq: number;
  readonly ts: number;
  readonly level: LogLevel;
  readonly msg: string;
}

/** What a join code (or a list of bootstrap multiaddrs) names, shown before the volunteer joins. */
export interface SwarmDescription {
  readonly runId: string;
  /** The bootstrap peers' multiaddrs. */
  readonly peers: readonly string[];
  /** A closed swarm: the code carries its pre-shared key. */
  readonly closed: boolean;
}

/** Facts about this installation, for the About panel. */
export interface AboutInfo {
  readonly version: string;
  readonly licence: string;
  readonly dataDir: string;
  /** The rotating log file's folder; null where the node logs to stderr only (headless). */
  readonly logDir: string | null;
}

/** The run's dataset being fetched from the swarm before training (a joiner with an empty data directory). */
export interface DataFetchProgress {
  readonly datasetId: string;
  /** Bytes of the shards received, and their total. */
  readonly bytes: number;
  readonly totalBytes: number;
  readonly shardsDone: number;
  readonly shardsTotal: number;
  readonly bytesPerSecond: number;
  /** Seconds left at the rate so far; null before any byte arrived. */
  readonly etaSeconds: number | null;
}

/** The run's data as this node has it: the fetch (the last progress, kept once done) and a matchmaking refusal for other data. */
export interface DataStatus {
  readonly fetch: (DataFetchProgress & { readonly at: number }) | null;
  /** Matchmaking refused this peer (DATA_MISMATCH): `reason` names both datasets, `advice` says what to do. */
  readonly mismatch: { readonly reason: string; readonly advice: string; readonly at: number } | null;
}

/**
 * What the volunteer must know and would otherwise find in the log only: peers of another Cohort
 * release or tensor schema (this node cannot train with them), or Start training in the run the
 * coordinator switch runs rather than the join code's. `text` says what it means and what to do.
 */
export type NoticeKind = 'other-release' | 'other-schema' | 'coordinated-run';
export interface Notice {
  readonly kind: NoticeKind;
  readonly text: string;
  readonly at: number;
}

/** Everything the dashboard shows at a glance, pushed on every change. */
export interface Snapshot {
  readonly version: string;
  readonly contribution: ContributionStatus;
  readonly mine: MyContribution;
  readonly swarm: SwarmState;
  readonly coordinator: CoordinatorStatus;
  readonly peers: readonly PeerRow[];
  /** Sequence number of the newest log line, so the UI knows when to fetch logs. */
  readonly lastLogSeq: number;
  readonly data: DataStatus;
  /** One per kind, oldest first, for as long as this node is in its swarm. */
  readonly notices: readonly Notice[];
  readonly firstRunDone: boolean;
  /**
   * The swarm an empty join code joins: the build's default run (assets/default-swarm.json) or the
   * node's initial peers (`--initial-peers`, COHORT_INITIAL_PEERS, the config file); null: none, so
   * Start without a join code trains on this machine alone.
   */
  readonly defaultSwarm: SwarmDescription | null;
  readonly about: AboutInfo;
}

/** Chart series the dashboard can ask for. */
const CHART_SERIES = ['loss', 'samples_per_second', 'swarm_samples_per_second'] as const;
export type ChartSeries = (typeof CHART_SERIES)[number];

const SeriesQuerySchema = z
  .object({
    series: z.enum(CHART_SERIES),
    /** Only points at or after this time (ms since the epoch). */
    since: z.number().int().min(0).optional(),
  })
  .strict();
export type SeriesQuery = z.infer<typeof SeriesQuerySchema>;

export interface SeriesData {
  readonly series: ChartSeries;
  /** Times in seconds since the epoch (uPlot's convention) and values, same length. */
  readonly t: readonly number[];
  readonly v: readonly number[];
}

const LogQuerySchema = z
  .object({ after: z.number().int().min(0).optional() })
  .strict();
export type LogQuery = z.infer<typeof LogQuerySchema>;

const JoinCodeQuerySchema = z.object({ code: z.string().max(8192, 'a join code is at most 8192 characters') }).strict();
export type JoinCodeQuery = z.infer<typeof JoinCodeQuerySchema>;

const CoordinatorToggleSchema = z.object({ enabled: z.boolean() }).strict();
export type CoordinatorToggle = z.infer<typeof CoordinatorToggleSchema>;

/** The request/response verbs. */
export interface CohortCalls {
  getSnapshot(): Promise<Snapshot>;
  getSeries(query: SeriesQuery): Promise<SeriesData>;
  getLogs(query: LogQuery): Promise<LogLine[]>;
  getSettings(): Promise<AppSettings>;
  updateSettings(patch: SettingsPatch): Promise<Result<AppSettings>>;
  startContribution(): Promise<Result<ContributionStatus>>;
  pauseContribution(): Promise<Result<ContributionStatus>>;
  setCoordinator(toggle: CoordinatorToggle): Promise<Result<CoordinatorStatus>>;
  /** Decodes a join code without joining: the swarm it names, or why it is not a valid code. */
  describeJoinCode(query: JoinCodeQuery): Promise<Result<SwarmDescription>>;
  /** Opens the log folder in the file manager (the desktop app; a headless node says where its log goes). */
  openLogFolder(): Promise<Result<null>>;
  /**
   * Renames a database the node cannot open (damaged, or not Cohort's) aside and starts the node afresh
   * (the desktop app; a headless node is started with `--move-aside` instead).
   */
  moveDatabaseAside(): Promise<Result<null>>;
}

export type MethodName = keyof CohortCalls;

/** The full API a UI gets: the verbs plus a live stream of snapshots. */
export interface CohortApi extends CohortCalls {
  /**
   * Calls `listener` with every new snapshot; returns the unsubscribe function. `onConnection` hears
   * when the node is lost or regained (HTTP drops; the desktop runtime crashed and restarts), and why;
   * `canMoveAside` when the node cannot open its database and `moveDatabaseAside` would start it afresh.
   */
  subscribe(listener: (snapshot: Snapshot) => void, onConnection?: (connected: boolean, detail?: string, canMoveAside?: boolean) => void): () => void;
}

/** The schema of each verb's one argument (null = takes none), used by every transport's receiving side. */
export const METHOD_INPUTS = {
  getSnapshot: null,
  getSeries: SeriesQuerySchema,
  getLogs: LogQuerySchema,
  getSettings: null,
  updateSettings: SettingsPatchSchema,
  startContribution: null,
  pauseContribution: null,
  setCoordinator: CoordinatorToggleSchema,
  describeJoinCode: JoinCodeQuerySchema,
  openLogFolder: null,
  moveDatabaseAside: null,
} as const satisfies Record<MethodName, z.ZodType | null>;
