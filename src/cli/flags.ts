import { ConfigError } from '../config/load.js';

/** Command-flag parsers: a bad value is a ConfigError naming the flag and what it accepts (exit 2). */
export function intFlag(flag: string, raw: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < min || n > max) throw new ConfigError(flag, `invalid value ${JSON.stringify(raw)}; accepted: an integer from ${min} to ${max}`);
  return n;
}

export function positiveFloatFlag(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) throw new ConfigError(flag, `invalid value ${JSON.stringify(raw)}; accepted: a number > 0`);
  return n;
}

export function choiceFlag<T extends string>(flag: string, raw: string | undefined, choices: readonly T[]): T | undefined {
  if (raw === undefined) return undefined;
  if (!(choices as readonly string[]).includes(raw)) throw new ConfigError(flag, `invalid value ${JSON.stringify(raw)}; accepted: ${choices.join(', ')}`);
  return raw as T;
}

export function requiredFlag<T>(flag: string, value: T | undefined): T {
  if (value === undefined) throw new ConfigError(flag, 'is required');
  return value;
}
