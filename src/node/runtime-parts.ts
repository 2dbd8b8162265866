/**
 * Where the collaborative-training work plugs into the node controller. Until those parts exist the
 * controller runs without them and says so; it never invents numbers.
 */
import type { AppSettings, LogLevel, SwarmState } from '../shared/api.js';

/** Typed progress the training runtime pushes; the dashboard updates at once instead of at the next store poll. */
export type TrainingEvent =
  | { readonly type: 'progress'; readonly swarm: Partial<Omit<SwarmState, 'updatedAt'>>; readonly at: number }
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

/** The coordinator role (bootstraps peers, records metrics, keeps checkpoints). */
export interface CoordinatorRole {
  start(): Promise<{ joinCode: string; multiaddrs: readonly string[] }>;
  stop(): Promise<void>;
}
