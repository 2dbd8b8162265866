import { z } from 'zod';
import { ConfigError } from '../config/load.js';
import { parseFlagValue } from './flag-table.js';

/** Command-flag parsers for commands without a flag table: a bad value is a ConfigError naming the flag and what it accepts (exit 2). */
export function intFlag(flag: string, raw: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  return raw === undefined ? undefined : parseFlagValue(flag, raw, z.number().int().min(min).max(max));
}

export function positiveFloatFlag(flag: string, raw: string | undefined): number | undefined {
  return raw === undefined ? undefined : parseFlagValue(flag, raw, z.number().finite().positive());
}

export function probabilityFlag(flag: string, raw: string | undefined): number | undefined {
  return raw === undefined ? undefined : parseFlagValue(flag, raw, z.number().min(0).max(1));
}

export function choiceFlag<T extends string>(flag: string, raw: string | undefined, choices: readonly T[]): T | undefined {
  return raw === undefined ? undefined : parseFlagValue<z.ZodType<T>>(flag, raw, z.enum(choices as [T, ...T[]]));
}

export function requiredFlag<T>(flag: string, value: T | undefined): T {
  if (value === undefined) throw new ConfigError(flag, 'is required');
  return value;
}
