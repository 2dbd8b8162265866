/** Errors of the collaborative layer, by name, so callers (the CLI, the app) can tell them apart. */

/** A joiner's explicit run setting contradicts the swarm's published one. */
export class RunSettingsConflictError extends Error {
  override readonly name = 'RunSettingsConflictError';
  constructor(
    /** The run setting (a key of RunSettings). */
    readonly field: string,
    mine: unknown,
    theirs: unknown,
    owner: string,
  ) {
    super(`${show(mine)} contradicts the swarm's ${show(theirs)} (published by ${owner}); omit it to adopt the swarm's`);
  }
}

/**
 * A joiner found no run record in the swarm within its wait (and keeps none from an earlier session):
 * it stops rather than train on settings that are not the run's. The message says what was tried.
 */
export class RunRecordUnavailableError extends Error {
  override readonly name = 'RunRecordUnavailableError';
}

/** A training state (a donor's download, a checkpoint) that cannot be used. */
export class TrainingStateError extends Error {
  override readonly name = 'TrainingStateError';
}

function show(value: unknown): string {
  return value === undefined ? 'default' : typeof value === 'boolean' ? (value ? 'on' : 'off') : typeof value === 'string' || typeof value === 'number' ? String(value) : JSON.stringify(value);
}
