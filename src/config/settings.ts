import { z } from 'zod';
import { defaultDataDir } from './paths.js';

/**
 * Every setting Cohort reads, in one table: its schema, flag, environment variable and default.
 * Flags, `COHORT_*` variables and the config file are all derived from this table, so a setting is
 * declared once. Values from flags and env arrive as strings; the schemas coerce them.
 */
export interface SettingSpec<T = unknown> {
  readonly schema: z.ZodType<T>;
  readonly description: string;
  /** Placeholder for the flag's value, e.g. `<path>`; omitted for boolean switches. */
  readonly arg?: string;
  readonly default: () => T;
  /** Human list of accepted values, shown in errors and --help. */
  readonly accepted?: string;
}

/** A switch's value from a flag, a variable or a file: a boolean, or true/false, 1/0, yes/no, on/off. */
export const booleanish = z.union([
  z.boolean(),
  z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off']))
    .transform((s) => ['true', '1', 'yes', 'on'].includes(s)),
]);

/** A comma-separated value (a flag, a variable) as its items. */
export function commaList(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter(Boolean);
}

const commaListSchema = z.union([z.array(z.string().trim().min(1)), z.string().transform(commaList)]);

const port = z.coerce.number().int().min(0).max(65535);

function setting<T>(spec: SettingSpec<T>): SettingSpec<T> {
  return spec;
}

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
const LOG_FORMATS = ['pretty', 'json'] as const;
const TRAINING_MODES = ['local', 'off'] as const;

export const SETTINGS = {
  dataDir: setting({
    schema: z.string().trim().min(1, 'must not be empty'),
    arg: '<path>',
    description: 'directory for the database, checkpoints and data cache',
    default: () => defaultDataDir(),
  }),
  logLevel: setting({
    schema: z.enum(LOG_LEVELS),
    arg: '<level>',
    accepted: LOG_LEVELS.join(', '),
    description: 'minimum level of log lines',
    default: () => 'info' as const,
  }),
  logFormat: setting({
    schema: z.enum(LOG_FORMATS),
    arg: '<format>',
    accepted: LOG_FORMATS.join(', '),
    description: 'human-readable lines or one JSON object per line',
    default: () => 'pretty' as const,
  }),
  initialPeers: setting({
    schema: commaListSchema,
    arg: '<addrs>',
    accepted: 'comma-separated multiaddrs, e.g. /ip4/203.0.113.5/tcp/31337/p2p/12D3Koo…, or one join code (cohort:…)',
    description: 'peers to bootstrap from',
    default: () => [] as string[],
  }),
  dashboardHost: setting({
    schema: z.string().trim().min(1),
    arg: '<host>',
    description: 'address the dashboard listens on (beyond loopback needs an access token)',
    default: () => '127.0.0.1',
  }),
  dashboardPort: setting({
    schema: port,
    arg: '<port>',
    accepted: 'an integer from 0 to 65535 (0 = any free port)',
    description: 'port of the local dashboard',
    default: () => 7870,
  }),
  dashboardToken: setting({
    schema: z
      .string()
      .trim()
      .refine((s) => s === '' || /^[\x21-\x7e]{16,256}$/.test(s), 'must be 16 to 256 printable characters without spaces'),
    arg: '<token>',
    accepted: '16 to 256 printable characters without spaces (e.g. from `openssl rand -hex 24`)',
    description: 'access token the dashboard and its API require; needed to serve beyond loopback',
    default: () => '',
  }),
  training: setting({
    schema: z.enum(TRAINING_MODES),
    arg: '<mode>',
    accepted: TRAINING_MODES.join(', '),
    description: 'what Start computes: local = this machine trains ALBERT, with the swarm of the join code or default run, else alone (the prepared dataset, else the bundled corpus); off = serve the dashboard only',
    default: () => 'local' as const,
  }),
  moveAside: setting({
    schema: booleanish,
    accepted: 'true or false',
    description: 'if the database is corrupt or not Cohort’s, rename it aside and start a new one',
    default: () => false,
  }),
} satisfies Record<string, SettingSpec>;

export type SettingKey = keyof typeof SETTINGS;
export type Config = { [K in SettingKey]: ReturnType<(typeof SETTINGS)[K]['default']> };

/** `dataDir` → `--data-dir` */
export function flagName(key: string): string {
  return '--' + key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
}

/** `dataDir` → `COHORT_DATA_DIR` */
export function envName(key: string): string {
  return 'COHORT_' + key.replace(/[A-Z]/g, (c) => '_' + c).toUpperCase();
}
