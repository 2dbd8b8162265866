import { z } from 'zod';

/**
 * The volunteer's preferences, defined once: the node validates what it stores, the headless server
 * and Electron main validate what they receive, and the renderer validates the form before sending.
 */
/**
 * A whole number in [min, max] whose every refusal says so, in the volunteer's words: the form shows
 * it under the field (an emptied number field reaches the schema as null).
 */
function wholeNumber(min: number, max: number) {
  const message = `a whole number from ${min} to ${max}`;
  return z.number({ error: message }).int(message).min(min, message).max(max, message);
}

export const PoliciesSchema = z
  .object({
    /** Hold contribution while the machine runs on battery. */
    pauseOnBattery: z.boolean(),
    /** Contribute only while nobody uses the machine. */
    onlyWhenIdle: z.boolean(),
    /** Minutes without keyboard or mouse input before the machine counts as idle. */
    idleMinutes: wholeNumber(1, 240),
    /** CPU threads the engine may use. */
    maxCpuThreads: wholeNumber(1, 256),
    useGpu: z.boolean(),
    /** Memory the runtime may use, in MiB. */
    maxMemoryMiB: wholeNumber(512, 1_048_576),
    /** Network bandwidth cap in KiB/s; 0 means no cap. */
    bandwidthCapKiBps: wholeNumber(0, 10_485_760),
    /**
     * fp16: mixed precision (float16 matmuls with dynamic loss scaling; faster on GPUs with tensor
     * cores, no faster on CPUs). Defaulted so settings stored before it existed still load.
     */
    precision: z.enum(['fp32', 'fp16']).default('fp32'),
    /** Keep the machine from sleeping while contributing (Folding@home's keep_awake). */
    keepAwake: z.boolean().default(true),
    /** Compute only between these hours of the day (BOINC's cpu_times). */
    scheduleEnabled: z.boolean().default(false),
    /** Hour of the day (0–23, local time) the schedule opens; a window may wrap past midnight (22 → 7). */
    scheduleFromHour: z.number().int().min(0, 'an hour from 0 to 23').max(23, 'an hour from 0 to 23').default(22),
    /** Hour of the day (0–23) the schedule closes; equal to the opening hour means all day. */
    scheduleToHour: z.number().int().min(0, 'an hour from 0 to 23').max(23, 'an hour from 0 to 23').default(7),
  })
  .strict();
export type Policies = z.infer<typeof PoliciesSchema>;

/** The policies training reads as it starts (engine, micro-batch, upload limit): changing one while contributing restarts it. */
export const RESTART_POLICIES = ['maxCpuThreads', 'useGpu', 'maxMemoryMiB', 'bandwidthCapKiBps', 'precision'] as const satisfies readonly (keyof Policies)[];

/**
 * A join code's shape, checked where the swarm layer's decoder cannot run (the page); the node decodes
 * it fully (run id, addresses, checksum) before storing it.
 */
export const JoinCodeSchema = z
  .string()
  .trim()
  .max(2048, 'a join code is at most 2048 characters')
  .regex(/^[\x21-\x7e]*$/, 'a join code has no spaces or control characters');

export const AppSettingsSchema = z
  .object({
    policies: PoliciesSchema,
    /** Join code of the swarm to contribute to; '' = the build's default run if it has one, else training alone. */
    joinCode: JoinCodeSchema,
    /** Name shown for this volunteer in the contribution table. */
    displayName: z.string().trim().max(64, 'a display name is at most 64 characters'),
    /** Start the desktop app when the user logs in (opt-in). */
    startAtLogin: z.boolean(),
    /** The first-run screen has been passed. */
    firstRunDone: z.boolean(),
    /** The "Cohort keeps contributing in the tray" notice has been shown once. */
    trayNoticeShown: z.boolean(),
  })
  .strict();
export type AppSettings = z.infer<typeof AppSettingsSchema>;

/** What a client may change in one call: any subset, policies merged field by field. */
export const SettingsPatchSchema = AppSettingsSchema.extend({ policies: PoliciesSchema.partial().strict() }).partial().strict();
export type SettingsPatch = z.infer<typeof SettingsPatchSchema>;

export const DEFAULT_SETTINGS: AppSettings = {
  // the policies PoliciesSchema has no default for; it adds its defaults of the others
  policies: PoliciesSchema.parse({
    pauseOnBattery: true,
    onlyWhenIdle: false,
    idleMinutes: 5,
    maxCpuThreads: 2,
    useGpu: true,
    maxMemoryMiB: 4096,
    bandwidthCapKiBps: 0,
  }),
  joinCode: '',
  displayName: '',
  startAtLogin: false,
  firstRunDone: false,
  trayNoticeShown: false,
};

/** Applies a validated patch; policies are merged so a form can send only what changed. */
export function applySettingsPatch(current: AppSettings, patch: SettingsPatch): AppSettings {
  const { policies, ...rest } = patch;
  return AppSettingsSchema.parse({ ...current, ...rest, policies: { ...current.policies, ...policies } });
}
