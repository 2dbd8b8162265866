/**
 * Command flags declared as rows over zod schemas. A row's schema is usually a field of the schema that
 * owns the value (the run record's settings, the collaborative optimizer's options), so its range,
 * accepted values and default are written once: the flag's placeholder, --help text, default and parser
 * are derived from it, and `describeCommandEnv` gives every row a `COHORT_*` variable and config key.
 */
import { Option, type Command } from 'commander';
import { z } from 'zod';
import { ConfigError } from '../config/load.js';
import { flagName } from '../config/settings.js';
import { outputPathProblem } from '../util/output-path.js';

export interface FlagRow<S extends z.ZodType = z.ZodType> {
  readonly schema: S;
  readonly description: string;
  /** The flag when it is not the key in kebab case (`peakLr` → `--lr`). */
  readonly flag?: string;
  /** The value's placeholder when not derived from the schema (`<KiB/s>`). */
  readonly arg?: string;
  /** The value when the flag is omitted; the schema's own `.default()` when absent here. */
  readonly default?: z.output<S>;
  /** What the flag accepts, in words, when the schema cannot say it (a refinement). */
  readonly accepted?: string | undefined;
  /** Appended to the description: the run-wide settings say so in --help. */
  readonly tag?: string;
}

export type FlagTable = Readonly<Record<string, FlagRow>>;

/** What a row parses to: undefined when the flag is omitted and the row has no default. */
type FlagValue<R extends FlagRow> = R extends { default: infer D }
  ? [D] extends [undefined]
    ? z.output<R['schema']> | undefined
    : Exclude<z.output<R['schema']>, undefined>
  : R['schema'] extends z.ZodDefault
    ? z.output<R['schema']>
    : z.output<R['schema']> | undefined;

export type FlagValues<T extends FlagTable> = { -readonly [K in keyof T]: FlagValue<T[K]> };

/** A row, its literal type kept (so whether it has a default shows in the parsed value's type). */
export function flagRow<R extends FlagRow>(row: R): R {
  return row;
}

/** The table's rows with `tag` after their descriptions. */
export function tagged<T extends FlagTable>(table: T, tag: string): T {
  return Object.fromEntries(Object.entries(table).map(([key, row]) => [key, { ...row, tag }])) as T;
}

/** The schema under `.optional()` / `.default()`: what a given value is checked against. */
function baseOf(schema: z.ZodType): z.ZodType {
  return schema instanceof z.ZodOptional || schema instanceof z.ZodDefault ? baseOf(schema.unwrap() as z.ZodType) : schema;
}

function defaultOf(row: FlagRow): unknown {
  if (row.default !== undefined) return row.default;
  return row.schema instanceof z.ZodDefault ? row.schema.def.defaultValue : undefined;
}

/** The values a schema accepts, in words (errors and --help). */
export function acceptedOf(schema: z.ZodType): string {
  const base = baseOf(schema);
  if (base instanceof z.ZodEnum) return base.options.join(', ');
  if (base instanceof z.ZodBoolean) return 'true or false';
  if (base instanceof z.ZodNumber) {
    const min = base.minValue ?? -Infinity;
    const max = base.maxValue ?? Infinity;
    if (base.isInt) return `an integer from ${min} to ${max}`;
    const [low, high] = [Number.isFinite(min) && base.safeParse(min).success, Number.isFinite(max) && base.safeParse(max).success];
    if (low && high) return `a number from ${min} to ${max}`;
    const bounds = [Number.isFinite(min) ? `${low ? '≥' : '>'} ${min}` : '', Number.isFinite(max) ? `${high ? '≤' : '<'} ${max}` : ''];
    return ['a number', bounds.filter(Boolean).join(' and ')].filter(Boolean).join(' ');
  }
  if (base instanceof z.ZodString) return base.maxLength !== null ? `${base.minLength ?? 0}–${base.maxLength} characters` : 'text';
  throw new TypeError(`flag schemas are enums, booleans, numbers or strings; got ${base.constructor.name}`);
}

function placeholderOf(schema: z.ZodType): string | undefined {
  const base = baseOf(schema);
  if (base instanceof z.ZodBoolean) return undefined;
  if (base instanceof z.ZodEnum) return '<kind>';
  if (base instanceof z.ZodNumber) return base.isInt ? '<n>' : '<x>';
  return '<text>';
}

/** Adds the table's flags to `command` (before `describeCommandEnv`, which adds their variables to --help). */
export function addFlags(command: Command, table: FlagTable): Command {
  for (const [key, row] of Object.entries(table)) {
    const flag = flagOf(table, key);
    const arg = row.arg ?? placeholderOf(row.schema);
    const accepted = baseOf(row.schema) instanceof z.ZodEnum ? `; accepted: ${acceptedOf(row.schema)}` : '';
    const option = new Option(arg === undefined ? flag : `${flag} ${arg}`, `${row.description}${accepted}${row.tag ? ` ${row.tag}` : ''}`);
    const fallback = defaultOf(row);
    // a switch's default is "not given"; a valued flag shows its default in --help
    if (fallback !== undefined && arg !== undefined) option.default(fallback);
    command.addOption(option);
  }
  return command;
}

/**
 * Parses the table's flags of `command` (given, from a variable or the file, or defaulted); a bad value
 * is a ConfigError naming the flag (the CLI adds the variable or file key it came from; exit 2).
 */
export function parseFlags<T extends FlagTable>(command: Command, table: T): FlagValues<T> {
  const values: Record<string, unknown> = {};
  for (const [key, row] of Object.entries(table)) {
    const raw: unknown = command.getOptionValue(valueKeyOf(table, key));
    values[key] = raw === undefined ? defaultOf(row) : parseFlagValue(flagOf(table, key), raw, row.schema, row.accepted);
  }
  return values as FlagValues<T>;
}

/** One flag's value (text from the command line, a variable or the file; or a file's JSON value) as `schema` parses it. */
export function parseFlagValue<S extends z.ZodType>(flag: string, raw: unknown, schema: S, accepted?: string): z.output<S> {
  const base = baseOf(schema);
  const parsed = base.safeParse(fromText(base, raw));
  if (!parsed.success) throw new ConfigError(flag, `invalid value ${JSON.stringify(raw)}; accepted: ${accepted ?? acceptedOf(base)}`);
  return parsed.data as z.output<S>;
}

/** A flag's text as the schema's type: numbers are written in full (no `1e3abc`, no empty string). */
function fromText(base: z.ZodType, raw: unknown): unknown {
  if (typeof raw !== 'string' || !(base instanceof z.ZodNumber)) return raw;
  const text = raw.trim();
  const wellFormed = base.isInt ? /^-?\d+$/.test(text) : text !== '' && Number.isFinite(Number(text));
  return wellFormed ? Number(text) : raw;
}

/** The table's keys whose flag the user gave: on the command line, by a variable or in the config file. */
export function givenFlags<T extends FlagTable>(command: Command, table: T): Array<keyof T & string> {
  return Object.keys(table).filter((key) => !['default', undefined].includes(command.getOptionValueSource(valueKeyOf(table, key))));
}

/** Where commander keeps a row's value: named after the flag (`--lr` → `lr`), as its variable and config key are. */
function valueKeyOf(table: FlagTable, key: string): string {
  return new Option(flagOf(table, key)).attributeName();
}

/** A flag's value that has no default, or a ConfigError saying the flag is required. */
export function requiredFlag<T>(flag: string, value: T | undefined): T {
  if (value === undefined) throw new ConfigError(flag, 'is required');
  return value;
}

/** A flag naming where a command's output goes, or a ConfigError saying why nothing can be written there. */
export function outputFlag(flag: string, value: string, kind: 'folder' | 'file'): string {
  const problem = outputPathProblem(value, kind);
  if (problem !== undefined) throw new ConfigError(flag, problem);
  return value;
}

/** The flag of a table's key (for errors found after parsing, e.g. a combination). */
export function flagOf(table: FlagTable, key: string): string {
  const row = table[key];
  if (!row) throw new RangeError(`no flag for "${key}"`);
  return row.flag ?? flagName(key);
}
