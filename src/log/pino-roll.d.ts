// pino-roll ships no types; this is the part of its API Cohort uses (see its README).
declare module 'pino-roll' {
  import type { EventEmitter } from 'node:events';

  interface PinoRollOptions {
    /** Base path; the number (and extension) is appended. */
    file: string;
    /** Roll when a file reaches this size ('10m', '512k'; a number is MB). */
    size?: string | number;
    frequency?: 'daily' | 'hourly' | number;
    extension?: string;
    /** Keep this many files besides the current one. */
    limit?: { count?: number };
    mkdir?: boolean;
    sync?: boolean;
  }
  /** A SonicBoom file stream that reopens itself on the next file when it rolls. */
  export interface RollingFile extends EventEmitter {
    write(data: string): boolean;
    end(): void;
  }
  export default function pinoRoll(options: PinoRollOptions): Promise<RollingFile>;
}
