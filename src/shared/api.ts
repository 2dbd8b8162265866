/**
 * The one API between the node runtime and the UI. The Electron preload exposes it over IPC and
 * the headless node serves it over HTTP; both are derived from this definition, never re-declared.
 */
export interface ComponentState {
  readonly name: string;
  readonly available: boolean;
  readonly detail: string;
}

export interface NodeStatus {
  readonly version: string;
  readonly components: readonly ComponentState[];
}

export interface CohortApi {
  getStatus(): Promise<NodeStatus>;
}

/** IPC channel per API verb (main listens, preload invokes). */
export const IPC_CHANNELS = {
  getStatus: 'cohort:get-status',
} as const satisfies Record<keyof CohortApi, string>;
