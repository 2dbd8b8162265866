/**
 * The seams between the node host (src/node: controller, dashboard, API) and training: what Start and
 * Pause drive, the coordinator switch, and this node's presence in a swarm.
 */
import type { LeaderboardRecord } from '../collab/records.js';
import type { Logger } from '../log/logger.js';
import type { AppSettings, NodeReachability, Notice, SwarmDescription } from '../shared/api.js';
import type { Store } from '../store/index.js';
import type { TrainingEvent } from './events.js';

/** The volunteer's choices training must honour (threads, GPU, memory, bandwidth, which swarm). */
export type TrainingSettings = Pick<AppSettings, 'policies' | 'joinCode' | 'displayName'>;

export interface TrainingService {
  /** Called once before the first start and again whenever the volunteer changes these settings. */
  configure(settings: TrainingSettings): void;
  /** Begin or resume contributing compute. */
  start(): Promise<void>;
  /** Stop computing but keep state, so `start` resumes. */
  pause(): Promise<void>;
  /** Returns the unsubscribe function. */
  subscribe(listener: (event: TrainingEvent) => void): () => void;
}

/** A coordinator's leaderboard as found on the swarm: when it was published (ms since the epoch) and its rows. */
export type FoundLeaderboard = Pick<LeaderboardRecord, 'time' | 'rows'>;

/** This node's presence in a swarm, read on every snapshot (reachability changes when AutoNAT decides). */
export interface SwarmPresence {
  /** null while this node is in no swarm. */
  reachability(): NodeReachability | null;
  /** This node's peer id (its leaderboard name when the volunteer gave no display name); null while in no swarm. */
  peerId(): string | null;
  /** The newest coordinator leaderboard found (refreshed in the background); null while none was found. */
  leaderboard(): FoundLeaderboard | null;
  /** The peers this node holds a connection to now (none while in no swarm). */
  connectedPeers(): readonly string[];
  /** What the dashboard tells the volunteer about this node's swarm (peers of another release, …); none while in no swarm. */
  notices(): readonly Notice[];
}

/** The coordinator role (bootstraps peers, records metrics, keeps checkpoints). */
export interface CoordinatorRole {
  start(): Promise<{ joinCode: string; multiaddrs: readonly string[] }>;
  stop(): Promise<void>;
}

/** What a node host attaches: each part is optional (a node with training off serves the dashboard only). */
export interface NodeParts {
  readonly training?: TrainingService;
  readonly coordinator?: CoordinatorRole;
  readonly swarm?: SwarmPresence;
  /** The swarm an empty join code joins (the node's default run); absent: none, an empty code trains alone. */
  readonly defaultSwarm?: SwarmDescription;
}

/** Makes the parts with the node's store and logger (whose lines also reach the dashboard's log panel). */
export type MakeNodeParts = (context: { readonly log: Logger; readonly store: Store }) => NodeParts;
