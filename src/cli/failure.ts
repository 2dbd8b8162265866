/** A command's failure at run time whose message names what went wrong and what to do: the CLI prints that one line, exit 1. */
export class CommandFailure extends Error {
  override readonly name = 'CommandFailure';
}
