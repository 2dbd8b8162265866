/**
 * What a training loop reports, solo or with a swarm: one typed stream. The loops only emit; the sink
 * (sink.ts) turns each event into the store's metric rows, the dashboard's live numbers and log lines.
 */
import type { AveragingEvent } from '../averaging/index.js';
import type { DataFetchProgress } from '../shared/api.js';

/** The swarm as this node sees it (alone, a swarm of one whose every batch is a step). */
export interface SwarmView {
  /** Optimizer steps the swarm has taken. */
  readonly epoch: number;
  readonly peers: number;
  readonly samplesPerSecond: number;
  /** Samples gathered toward the next step. */
  readonly samplesAccumulated: number;
  readonly targetBatchSize: number;
  /** Seconds until the swarm reaches the target batch size; null when unknown. */
  readonly etaSeconds: number | null;
}

export type TrainingEvent =
  /** A micro-batch went into the current epoch; `samplesPerSecond` is this node's throughput. */
  | { readonly type: 'progress'; readonly samplesPerSecond: number; readonly swarm: SwarmView; readonly at: number }
  /** An optimizer step into `epoch` (`alone`: this node's own, no swarm); `contributed` is this node's running total. */
  | { readonly type: 'stepped'; readonly epoch: number; readonly loss: number; readonly alone: boolean; readonly contributed: { readonly samples: number; readonly seconds: number }; readonly at: number }
  /** A step of one of the swarm's averagers (gradients, state): matchmaking, group, result. */
  | { readonly type: 'averaging'; readonly round: string; readonly event: AveragingEvent; readonly at: number }
  /** A micro-batch with a non-finite loss or gradient was skipped; `total` such micro-batches so far. */
  | { readonly type: 'skipped'; readonly reason: string; readonly total: number; readonly at: number }
  /** A step left non-finite parameters and the backup of `epoch` was restored; `total` restores so far. */
  | { readonly type: 'restored'; readonly epoch: number; readonly reason: string; readonly total: number; readonly at: number }
  /** The run's dataset is being fetched from the swarm (before training starts); at most a few a second, and the last. */
  | { readonly type: 'data-fetch'; readonly progress: DataFetchProgress; readonly at: number }
  /** Matchmaking refused this peer for training on other data than the swarm's (it steps alone): `reason` names both, `advice` what to do. */
  | { readonly type: 'data-mismatch'; readonly reason: string; readonly advice: string; readonly at: number }
  /** Start trains on this machine alone, not with a swarm: `reason` says why (no join code, no peer of it answered, …). */
  | { readonly type: 'alone'; readonly reason: string; readonly at: number }
  /** Start (or a later try after it trained alone) trains with the swarm `runId`. */
  | { readonly type: 'joined'; readonly runId: string; readonly at: number }
  /** Training stopped itself (the memory limit, an error) and stays stopped until the volunteer's next Start. */
  | { readonly type: 'halted'; readonly cause: HaltCause; readonly reason: string; readonly at: number };

/** Why training stopped itself: the memory watchdog, or an error it could not go on from. */
export type HaltCause = 'memory' | 'error';

export type EmitTrainingEvent = (event: TrainingEvent) => void;
