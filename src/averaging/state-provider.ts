import type { StateMetadata } from './messages.js';

/** What a donor serves: opaque bytes plus small metadata; the optimizer decides what a state is. */
export interface StateSnapshot {
  readonly epoch: number;
  readonly data: Uint8Array;
  readonly metadata?: StateMetadata;
}

export interface StateProvider {
  /** The epoch this peer would serve now (advertised in the DHT; cheap). */
  epoch(): number;
  /** The state to send; called once per download. */
  snapshot(): Promise<StateSnapshot> | StateSnapshot;
  /**
   * Whether a snapshot now costs only its encoding (false while a delayed optimizer step is pending,
   * which a snapshot would take early): the advertised hash waits for it. @default always
   */
  settled?(): boolean;
}
