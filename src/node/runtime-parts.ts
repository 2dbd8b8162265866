/**
 * Where the collaborative-training work plugs into the node controller. Until those parts exist the
 * controller runs without them and says so; it never invents numbers.
 */
import type { AppSettings, LogLevel, NodeReachability, SwarmState } from '../shared/api.js';

/** Typed progress the training runtime pushes; the dashboard updates at once instead of at the next store poll. */
export type TrainingEvent =
  | { readonly type: 'progress'; readonly swarm: Partial<Omit<SwarmState, 'updatedAt' | 'reachability'>>; readonly at: number }
  | { readonly type: 'log'; readonly level: LogLevel; readonly msg: string; readonly at: number }
  /** Training stopped itself (the memory limit) and stays stopped until the volunteer's next Start. */
  | { readonly type: 'halted'; readonly reason: string; readonly at: number };

/** The volunteer's choices the training runtime must honour (threads, GPU, memory, bandwidth, which swarm). */
export type TrainingSettings = Pick<AppSettings, 'policies' | 'joinCode' | 'displayName'>;

export interface TrainingRuntime {
  /** Called once before the first start and again whenever the volunteer changes these settings. */
  configure(settings: TrainingSettings): void;
  /** Begin or resume contributing compute. */
  start(): Promise<void>;
  /** Stop computing but keep state, so `start` resumes. */
  pause(): Promise<void>;
  /** Returns the unsubscribe function. */
  subscribe(listener: (event: TrainingEvent) => void): () => void;
}

/** A coordinator's leaderboard as found on the swarm (src/collab/records.ts). */
export interface FoundLeaderboard {
  /** When the coordinator published it (ms since the epoch). */
  readonly time: number;
  readonly rows: ReadonlyArray<{ readonly name: string; readonly samples: number; readonly computeHours?: number | undefined; readonly share: number; readonly rank: number }>;
}

/** This node's presence in a swarm, read on every snapshot (reachability changes when AutoNAT decides). */
export interface SwarmPresence {
  /** null while this node is in no swarm. */
  reachability(): NodeReachability | null;
  /** This node's peer id (its leaderboard name when the volunteer gave no display name); null while in no swarm. */
  peerId(): string | null;
  /** The newest coordinator leaderboard found (refreshed in the background); null while none was found. */
  leaderboard(): FoundLeaderboard | null;
}

/** The coordinator role (bootstraps peers, records metrics, keeps checkpoints). */
export interface CoordinatorRole {
  start(): Promise<{ joinCode: string; multiaddrs: readonly string[] }>;
  stop(): Promise<void>;
}
