import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createLogger } from '../../src/log/logger.js';

/** A logger that keeps the messages of its warnings (and worse). */
export function warningLog() {
  const warnings: string[] = [];
  return { warnings, log: pino({ level: 'warn' }, { write: (line: string) => void warnings.push((JSON.parse(line) as { msg: string }).msg) }) };
}

/** A project logger whose lines are kept (JSON), to assert on what was logged. */
export function capturingLogger(): { log: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { log: createLogger({ logLevel: 'info', logFormat: 'json' }, sink), lines };
}
