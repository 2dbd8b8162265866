import type { LogLevel, LogLine } from '../shared/api.js';

/** The newest log lines for the dashboard's log panel; old lines fall off the end. */
export class LogRing {
  private readonly lines: LogLine[] = [];
  private seq = 0;

  constructor(private readonly capacity = 500) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`LogRing capacity ${capacity} must be a positive integer`);
  }

  push(level: LogLevel, msg: string, ts = Date.now()): LogLine {
    const line: LogLine = { seq: ++this.seq, ts, level, msg };
    this.lines.push(line);
    if (this.lines.length > this.capacity) this.lines.splice(0, this.lines.length - this.capacity);
    return line;
  }

  /** Lines with a sequence number greater than `seq` (all kept lines when omitted). */
  after(seq = 0): LogLine[] {
    return this.lines.filter((l) => l.seq > seq);
  }

  get lastSeq(): number {
    return this.seq;
  }
}
