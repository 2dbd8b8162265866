/**
 * Group all-reduce for collaborative training (hivemind's DecentralizedAverager): matchmaking
 * through DHT records, butterfly all-reduce over libp2p streams with compression and fault
 * tolerance, and state download for newcomers.
 *
 * @example
 * const averager = createAverager(node, { prefix: 'grad', targetGroupSize: 16, matchmakingTimeMs: 5000 });
 * const result = await averager.step(gradients, { epoch: 12, weight: samples });
 * const round = averager.schedule({ epoch: 13, size: gradients.length }); // before the epoch ends
 * const later = await round.run(gradients, samples); // the group is (mostly) found by now
 * if (result.ok) gradients.set(result.vector); // else: result.reason says why no group formed
 * await averager.serveState({ epoch: () => epoch, snapshot: () => ({ epoch, data: stateBytes }) });
 * const loaded = await newcomer.loadStateFromPeers(); // { epoch, data, metadata, donor }
 */
import type { SwarmNode } from '../swarm/index.js';
import { Averager, type AveragerInit } from './averager.js';
import { AveragingHub, type OffenceLedger } from './hub.js';
import { advertisedStateEpoch as newestAdvertised } from './state-download.js';

export function createAverager(node: SwarmNode, init: AveragerInit): Averager {
  return new Averager(node, init);
}

/** Keeps `node`'s averaging offences and bans in `ledger` (its store, per run): they outlive a restart. */
export function keepOffences(node: SwarmNode, ledger: OffenceLedger): void {
  AveragingHub.of(node).keepOffences(ledger);
}
export type { OffenceLedger } from './hub.js';

/** The newest epoch another peer serves a state of under `prefix`, by the rules a newcomer downloads by (`trusted`: the join code's peers); undefined when none does. */
export function advertisedStateEpoch(node: SwarmNode, prefix: string, trusted: readonly string[] = []): Promise<number | undefined> {
  return newestAdvertised(node, AveragingHub.of(node), prefix, trusted);
}

export { Averager, type AveragerInit, type AveragingEvent, type ScheduledStep, type ScheduleOptions, type StepOptions, type StepResult } from './averager.js';
export type { AllreduceResult, FailedPart } from './allreduce.js';
export { COMPRESSIONS, type Compression } from './compression.js';
export type { GroupInfo } from './group.js';
export type { Fault } from './faults.js';
export type { Aggregation } from './reducer.js';
export { PowerSgd, powerSgdLayout } from './powersgd.js';
export type { LoadedState } from './state-download.js';
export type { StateProvider, StateSnapshot } from './state-provider.js';
export { dataPinsSchema, type DataPins, type StateMetadata } from './messages.js';
export { StateDownloadError, type JoinRefusal } from './errors.js';
