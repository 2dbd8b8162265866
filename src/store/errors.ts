/** Base class: every store failure names the database file it concerns. */
export class StoreError extends Error {
  constructor(
    readonly file: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The file exists but is not a readable SQLite database (truncated, overwritten, damaged). */
export class CorruptDatabaseError extends StoreError {
  override readonly name = 'CorruptDatabaseError';
}

/** The file is a valid SQLite database that some other program made. */
export class ForeignDatabaseError extends StoreError {
  override readonly name = 'ForeignDatabaseError';
}

/** The database was written by a newer Cohort; opening it here could damage it. */
export class NewerSchemaError extends StoreError {
  override readonly name = 'NewerSchemaError';
}

/** A stored checkpoint failed its checksum or lost chunks. */
export class CheckpointCorruptError extends StoreError {
  override readonly name = 'CheckpointCorruptError';
}
