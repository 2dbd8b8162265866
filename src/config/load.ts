import fs from 'node:fs';
import { SETTINGS, envName, flagName, type Config, type SettingKey } from './settings.js';

/** A setting's value was rejected; `source` names where it came from so the user can fix it there. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly source: string,
    message: string,
  ) {
    super(`${source}: ${message}`);
  }
}

export interface ConfigSources {
  /** Values given as command-line flags, keyed by setting name (commander's camelCase). */
  readonly flags?: Partial<Record<string, unknown>>;
  readonly env?: NodeJS.ProcessEnv;
  /** Path of a JSON config file; `undefined` means none. */
  readonly file?: string;
  /** Keys the file may hold beyond the settings table (commands' own flags, see cli/context.ts). */
  readonly otherKeys?: readonly string[];
}

/**
 * Resolves the configuration. Precedence, highest first: command-line flags, `COHORT_*`
 * environment variables, the config file, built-in defaults. Every value is validated; the first
 * bad one throws a ConfigError naming the flag, variable or file key and the accepted values.
 */
export function resolveConfig(sources: ConfigSources): Config {
  const fileValues = sources.file === undefined ? {} : readConfigFile(sources.file, sources.otherKeys ?? []);
  const env = sources.env ?? {};
  const flags = sources.flags ?? {};
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(SETTINGS) as SettingKey[]) {
    const candidates: Array<[string, unknown]> = [
      [flagName(key), flags[key]],
      [envName(key), env[envName(key)]],
      [`config file ${sources.file}: "${key}"`, fileValues[key]],
    ];
    const found = candidates.find(([, v]) => v !== undefined);
    out[key] = found === undefined ? SETTINGS[key].default() : parseSetting(key, found[1], found[0]);
  }
  return out as Config;
}

function parseSetting(key: SettingKey, raw: unknown, source: string): unknown {
  const spec = SETTINGS[key];
  const result = spec.schema.safeParse(raw);
  if (result.success) return result.data;
  const accepted = spec.accepted ? `; accepted: ${spec.accepted}` : '';
  const issue = result.error.issues[0]?.message ?? 'invalid value';
  throw new ConfigError(source, `invalid value ${JSON.stringify(raw)} (${issue})${accepted}`);
}

/** The config file's object; a key that is neither a setting nor one of `otherKeys` is an error. */
export function readConfigFile(file: string, otherKeys: readonly string[]): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`config file ${file}`, `cannot be read (${(err as Error).message})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`config file ${file}`, `is not valid JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError(`config file ${file}`, 'must hold a JSON object of settings');
  }
  const known = [...Object.keys(SETTINGS), ...otherKeys];
  const unknown = Object.keys(parsed).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new ConfigError(`config file ${file}`, `unknown setting(s) ${unknown.map((k) => `"${k}"`).join(', ')}; known: ${[...new Set(known)].join(', ')}`);
  }
  return parsed as Record<string, unknown>;
}
