// Training's errors that the CLI reports as one line; apart from session.ts, so the CLI loads them without the engine.

/** Training alone kept meeting a non-finite loss or gradient: going on would only skip every step. */
export class NonFiniteTrainingError extends Error {
  constructor(inARow: number, lr: number) {
    super(`the last ${inARow} steps had a non-finite loss or gradient (each skipped); the parameters or the data are broken, or the learning rate ${lr} is too high`);
    this.name = 'NonFiniteTrainingError';
  }
}

/** A pinned dataset could not be had: the message says what the volunteer can do. */
export class RunDataError extends Error {
  override readonly name = 'RunDataError';
}

/** `cohort model export` found nothing to export (no checkpoint, a missing tokenizer); the message says what. */
export class ModelExportError extends Error {
  override readonly name = 'ModelExportError';
}
