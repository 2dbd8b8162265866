import type { Database } from 'better-sqlite3';
import type { z } from 'zod';

/** Persistent key/value settings (the app's preferences); values are validated on read and write. */
export class SettingsStore {
  constructor(private readonly db: Database) {}

  get<T>(key: string, schema: z.ZodType<T>): T | undefined {
    const row = this.db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
    if (!row) return undefined;
    const parsed = schema.safeParse(JSON.parse(row.value));
    if (!parsed.success) throw new Error(`stored setting "${key}" is invalid: ${parsed.error.issues[0]?.message ?? 'bad value'}`);
    return parsed.data;
  }

  set<T>(key: string, value: T, schema: z.ZodType<T>): void {
    const checked = schema.parse(value);
    this.db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, JSON.stringify(checked));
  }
}
