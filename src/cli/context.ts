import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { ConfigError, readConfigFile, resolveConfig } from '../config/load.js';
import { SETTINGS, booleanish, flagName, envName, type Config, type SettingKey } from '../config/settings.js';
import { createLogger, type Logger } from '../log/logger.js';
import { addFlags, parseFlags, type FlagTable, type FlagValues } from './flag-table.js';

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

/**
 * A command's own flags (those not in the settings table) take a `COHORT_*` variable and a config-file
 * key too, named after the flag as the settings table names its own (`--target-batch-size` →
 * `COHORT_TARGET_BATCH_SIZE`, `"targetBatchSize"`), with the same precedence: flag > variable > file >
 * default. Their --help says so.
 */
export function describeCommandEnv(command: Command): void {
  withEnvAndFile.add(command);
  for (const option of ownOptions(command)) option.description += ` (env ${envName(option.attributeName())})`;
}

/** The commands whose own flags take variables and config-file keys (`cohort run`, `cohort swarm start`). */
const withEnvAndFile = new WeakSet<Command>();

/** Options of `command` that are not settings-table flags (those resolveConfig reads). */
function ownOptions(command: Command): Option[] {
  return command.options.filter((o) => !(o.attributeName() in SETTINGS));
}

/** Own option names of every command that takes them from a config file (what a file may hold besides settings). */
function commandOptionKeys(command: Command): string[] {
  let root = command;
  while (root.parent) root = root.parent;
  const walk = (c: Command): string[] => [...(withEnvAndFile.has(c) ? ownOptions(c).map((o) => o.attributeName()) : []), ...c.commands.flatMap(walk)];
  return walk(root);
}

/** Sets the command's own flags that were not given from `COHORT_*` variables, then from the config file. */
function applyEnvAndFile(command: Command, env: NodeJS.ProcessEnv, file: string | undefined): void {
  const fileValues = file === undefined ? {} : readConfigFile(file, commandOptionKeys(command));
  for (const option of ownOptions(command)) {
    const key = option.attributeName();
    const source = command.getOptionValueSource(key);
    if (source !== undefined && source !== 'default') continue;
    const variable = envName(key);
    const [raw, from, origin] = env[variable] !== undefined ? [env[variable], 'env' as const, variable] : fileValues[key] !== undefined ? [fileValues[key], 'config' as const, `config file ${file}: "${key}"`] : [undefined, undefined, ''];
    if (from === undefined) continue;
    // a variable is a string; a file value may be a string, number, boolean or list (as initialPeers)
    const text = typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'boolean' ? String(raw) : Array.isArray(raw) ? raw.join(',') : undefined;
    if (option.isBoolean()) {
      // read as the settings table reads its switches
      const value = booleanish.safeParse(text).data;
      if (value === undefined) throw new ConfigError(origin, `invalid value ${JSON.stringify(raw)}; accepted: true or false`);
      command.setOptionValueWithSource(key, value, from);
    } else {
      if (text === undefined) throw new ConfigError(origin, `invalid value ${JSON.stringify(raw)}; accepted: a string or a number`);
      command.setOptionValueWithSource(key, text, from);
    }
  }
}

/**
 * Where the value of `flag` came from when it was not the command line: its `COHORT_*` variable or its
 * config-file key (so an error names what the user must fix); undefined otherwise.
 */
export function originOf(command: Command, flag: string): string | undefined {
  const option = command.options.find((o) => o.long === flag);
  if (!option) return undefined;
  const source = command.getOptionValueSource(option.attributeName());
  return source === 'env' ? envName(option.attributeName()) : source === 'config' ? `config file key "${option.attributeName()}"` : undefined;
}

export interface CommandContext {
  readonly config: Config;
  readonly log: Logger;
}

/** Resolves config for the command being run (its flags plus the program's global flags) and makes the logger. */
export function commandContext(command: Command, env: NodeJS.ProcessEnv = process.env): CommandContext {
  const globals = command.optsWithGlobals<{ config?: string }>();
  const file = globals.config ?? env.COHORT_CONFIG ?? (fs.existsSync(DEFAULT_CONFIG_FILE) ? path.resolve(DEFAULT_CONFIG_FILE) : undefined);
  if (withEnvAndFile.has(command)) applyEnvAndFile(command, env, file);
  const config = resolveConfig({ flags: command.optsWithGlobals(), env, file, otherKeys: commandOptionKeys(command) });
  return { config, log: createLogger(config) };
}

/** Adds `table`'s flags to `command`; its action resolves the context, parses the flags and runs `body` with both. */
export function flagAction<T extends FlagTable>(command: Command, table: T, body: (flags: FlagValues<T>, context: CommandContext) => Promise<void>): void {
  addFlags(command, table);
  command.action(async () => {
    const context = commandContext(command);
    await body(parseFlags(command, table), context);
  });
}
