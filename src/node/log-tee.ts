import type { Logger } from '../log/logger.js';
import type { LogLevel } from '../shared/api.js';
import type { LogRing } from './log-ring.js';

/**
 * pino's levels as the dashboard's log panel shows them. The panel shows info and above whatever the
 * stderr log level is (a quiet terminal should not mean an empty panel); trace and debug stay out.
 */
const PANEL_LEVEL: Readonly<Record<string, LogLevel>> = { info: 'info', warn: 'warn', error: 'error', fatal: 'error' };

/**
 * The same logger, but every info-or-above line it (or a child of it) logs also lands in the
 * dashboard's log panel. Runtime parts log as usual (hivemind-style lines included) and the
 * volunteer sees them in the app.
 */
export function teeLogger(log: Logger, ring: LogRing): Logger {
  return new Proxy(log, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      if (prop === 'child') return (...args: unknown[]) => teeLogger((value as (...a: unknown[]) => Logger).apply(target, args), ring);
      const level = typeof prop === 'string' ? PANEL_LEVEL[prop] : undefined;
      if (level === undefined) return (value as (...a: unknown[]) => unknown).bind(target);
      return (...args: unknown[]) => {
        const text = lineText(args);
        if (text !== undefined) ring.push(level, text);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** The message of a pino call: `(msg)`, `(obj, msg)` or `(err)`. */
function lineText(args: readonly unknown[]): string | undefined {
  const text = args.find((a): a is string => typeof a === 'string');
  if (text !== undefined) return text;
  const first = args[0];
  if (first instanceof Error) return first.message;
  const err = (first as { err?: unknown } | undefined)?.err;
  return err instanceof Error ? err.message : undefined;
}
