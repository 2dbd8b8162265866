import fs from 'node:fs';
import path from 'node:path';
// CommonJS: its autoUpdater is a lazy getter that Node's ESM loader cannot see as a named export
import electronUpdater from 'electron-updater';

/** How often a running app looks for a new version. */
const CHECK_EVERY_MS = 6 * 60 * 60 * 1000;

/**
 * Looks for updates on the feed the installer was built with (`COHORT_UPDATE_URL=… npm run dist`
 * writes it to app-update.yml), downloads them and notifies; a build without a feed never checks.
 * Returns whether it checks.
 */
export function startAutoUpdate(resourcesPath: string, onError: (message: string) => void): boolean {
  if (!fs.existsSync(path.join(resourcesPath, 'app-update.yml'))) return false;
  const check = (): void => void electronUpdater.autoUpdater.checkForUpdatesAndNotify().catch((err: unknown) => onError(`update check failed: ${(err as Error).message}`));
  check();
  setInterval(check, CHECK_EVERY_MS).unref();
  return true;
}
