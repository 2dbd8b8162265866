/** A command's failure at run time whose message names what went wrong and what to do: the CLI prints that one line, exit 1. */
export class CommandFailure extends Error {
  override readonly name = 'CommandFailure';
}

/**
 * A command that printed its outcome itself (doctor's failed checks) and ends with `code`: the CLI adds
 * nothing. Commands end this way instead of setting process.exitCode, which main() does not read: a
 * test process's runner sets it after any failing test, and every later in-process command read as failed.
 */
export class CommandExit extends Error {
  override readonly name = 'CommandExit';
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}
