import os from 'node:os';
import path from 'node:path';

/** Where Cohort keeps its database and caches when no --data-dir is given (the OS's per-user app-data place). */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  const home = os.homedir();
  switch (platform) {
    case 'win32':
      return path.join(env.APPDATA ?? path.join(home, 'AppData', 'Roaming'), 'Cohort');
    case 'darwin':
      return path.join(home, 'Library', 'Application Support', 'Cohort');
    default:
      return path.join(env.XDG_DATA_HOME || path.join(home, '.local', 'share'), 'cohort');
  }
}
