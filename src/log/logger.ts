import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from '../config/settings.js';

export type { Logger };

/**
 * The process logger. Lines go to stderr so that commands can print results on stdout.
 * `pretty` is for people (hivemind-like lines), `json` for log collectors.
 */
export function createLogger(options: Pick<Config, 'logLevel' | 'logFormat'>, destination: NodeJS.WritableStream = process.stderr): Logger {
  const base = { level: options.logLevel, base: undefined };
  if (options.logFormat === 'json') return pino(base, destination as pino.DestinationStream);
  const stream = pretty({
    destination,
    sync: true,
    colorize: destination === process.stderr && process.stderr.isTTY === true,
    translateTime: 'SYS:yyyy-mm-dd HH:MM:ss',
    ignore: 'pid,hostname',
  });
  return pino(base, stream);
}
