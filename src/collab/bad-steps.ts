/**
 * Steps (or micro-batches) whose loss or gradient was not finite: in a row, and in total. Training
 * alone stops at the limit; a swarm peer leaves averaging.
 */
export class BadStepCounter {
  inARow = 0;
  total = 0;

  constructor(private readonly limit: number) {}

  /** Whether the run of bad steps has reached the limit (and no finite step has ended it since). */
  get atLimit(): boolean {
    return this.inARow >= this.limit;
  }

  /** Counts a bad step; true when it is the `limit`-th in a row. */
  add(): boolean {
    this.total++;
    return ++this.inARow === this.limit;
  }

  /** A finite step ends the run of bad ones. */
  reset(): void {
    this.inARow = 0;
  }
}
