import { pino } from 'pino';

/** A logger that keeps the messages of its warnings (and worse). */
export function warningLog() {
  const warnings: string[] = [];
  return { warnings, log: pino({ level: 'warn' }, { write: (line: string) => void warnings.push((JSON.parse(line) as { msg: string }).msg) }) };
}
