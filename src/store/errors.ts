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

/**
 * A database file Cohort refuses to open, never modified: `problem` says what is wrong with it and the
 * message adds what to do. Restarting cannot help: the file stays as it is.
 */
export class RefusedDatabaseError extends StoreError {
  constructor(
    file: string,
    readonly problem: string,
    advice: string,
    options?: { cause?: unknown },
  ) {
    super(file, `${problem}; it was left untouched. ${advice}`, options);
  }
}

/** A file that is not one of Cohort's databases: moving it aside (`--move-aside`) and starting afresh helps. */
export class UnusableDatabaseError extends RefusedDatabaseError {}

/** The file exists but is not a readable SQLite database (truncated, overwritten, damaged). */
export class CorruptDatabaseError extends UnusableDatabaseError {
  override readonly name = 'CorruptDatabaseError';
}

/** The file is a valid SQLite database that some other program made. */
export class ForeignDatabaseError extends UnusableDatabaseError {
  override readonly name = 'ForeignDatabaseError';
}

/**
 * The database was written by a newer Cohort; opening it here could damage it. Moving it aside would
 * hide the volunteer's history and identity behind a fresh start: the fix is a newer Cohort.
 */
export class NewerSchemaError extends RefusedDatabaseError {
  override readonly name = 'NewerSchemaError';
}

/** Another process runs a node on this data directory (see data-dir-lock.ts). */
export class DataDirectoryInUseError extends StoreError {
  override readonly name = 'DataDirectoryInUseError';
}

/** A stored checkpoint failed its checksum or lost chunks. */
export class CheckpointCorruptError extends StoreError {
  override readonly name = 'CheckpointCorruptError';
}

/** The disk holding a data directory filled up while Cohort wrote to it. */
export class DiskFullError extends StoreError {
  override readonly name = 'DiskFullError';
}

/** Whether `err`, or an error it was caused by, is a write refused for want of space (SQLite's SQLITE_FULL, the system's ENOSPC). */
export function isDiskFull(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (code === 'SQLITE_FULL' || code === 'ENOSPC') return true;
  }
  return false;
}
