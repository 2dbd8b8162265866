import path from 'node:path';
import { Writable } from 'node:stream';
import pinoRoll, { type RollingFile } from 'pino-roll';

/** Where the desktop app's log files go: a folder of the data directory (what "Open log folder" opens). */
export function logDirOf(dataDir: string): string {
  return path.join(dataDir, 'logs');
}

export interface LogFileOptions {
  /** Roll to a new file at this size, in bytes. @default 10 MiB */
  readonly maxBytes?: number;
  /** Older files kept besides the current one. @default 4 */
  readonly keep?: number;
}

/**
 * A rotating log file in `dir` (cohort.1.log, cohort.2.log, …; pino-roll numbers them and deletes the
 * oldest beyond `keep`). Writes are synchronous so the last lines before a crash are on disk.
 */
export function openLogFile(dir: string, options: LogFileOptions = {}): Promise<RollingFile> {
  return pinoRoll({ file: path.join(dir, 'cohort'), extension: '.log', size: `${Math.max(1, Math.ceil((options.maxBytes ?? 10 * 2 ** 20) / 1024))}k`, limit: { count: options.keep ?? 4 }, mkdir: true, sync: true });
}

/** One stream that writes each chunk to all of `targets` (stderr and the log file). */
export function teeStream(...targets: Array<{ write(chunk: string): unknown }>): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = chunk.toString();
      for (const t of targets) t.write(text);
      done();
    },
  });
}
