import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { resolveConfig } from '../config/load.js';
import { SETTINGS, flagName, envName, type Config, type SettingKey } from '../config/settings.js';
import { createLogger, type Logger } from '../log/logger.js';

/** Settings every command accepts. */
export const GLOBAL_SETTINGS: readonly SettingKey[] = ['dataDir', 'logLevel', 'logFormat'];

/** Default config file looked up in the working directory when neither --config nor COHORT_CONFIG is given. */
const DEFAULT_CONFIG_FILE = 'cohort.config.json';

/** Adds one flag per setting, described from the settings table (so --help shows the env name and accepted values). */
export function addSettingOptions(command: Command, keys: readonly SettingKey[]): Command {
  for (const key of keys) {
    const spec = SETTINGS[key];
    const accepted = spec.accepted ? `; accepted: ${spec.accepted}` : '';
    const option = new Option(spec.arg ? `${flagName(key)} ${spec.arg}` : flagName(key), `${spec.description} (env ${envName(key)}${accepted})`);
    command.addOption(option);
  }
  return command;
}

export interface CommandContext {
  readonly config: Config;
  readonly log: Logger;
}

/** Resolves config for the command being run (its flags plus the program's global flags) and makes the logger. */
export function commandContext(command: Command, env: NodeJS.ProcessEnv = process.env): CommandContext {
  const opts = command.optsWithGlobals<Record<string, unknown> & { config?: string }>();
  const file = opts.config ?? env.COHORT_CONFIG ?? (fs.existsSync(DEFAULT_CONFIG_FILE) ? path.resolve(DEFAULT_CONFIG_FILE) : undefined);
  const config = resolveConfig({ flags: opts, env, file });
  return { config, log: createLogger(config) };
}
