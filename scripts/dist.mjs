// `npm run dist`: builds the app and the installers for this platform with electron-builder.
// Packaging needs the Electron runtime for this platform; where it could not be downloaded, stop
// with a clear message instead of a long stack trace from deep inside electron-builder.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { register } from 'tsx/esm/api';

register();
const { electronBinary } = await import('../src/doctor/electron.ts');
const { buildApp } = await import('./build.mjs');
const require = createRequire(import.meta.url);

const electron = electronBinary();
if (!electron.found) {
  console.error(`npm run dist: cannot package the desktop app here: ${electron.reason}.`);
  console.error('Run `npm ci` on a machine that can download Electron (and, for the CUDA provider on Linux x64, NuGet), then `npm run dist` again.');
  process.exit(1);
}
buildApp();
const cli = path.join(path.dirname(require.resolve('electron-builder/package.json')), 'cli.js');
// The update feed is set at build time (COHORT_UPDATE_URL: a folder served over HTTPS holding what
// `dist/` produced, latest*.yml included); without it the installers carry no update configuration.
const feed = process.env.COHORT_UPDATE_URL ? ['-c.publish.provider=generic', `-c.publish.url=${process.env.COHORT_UPDATE_URL}`] : [];
const result = spawnSync(process.execPath, [cli, '--config', 'electron-builder.yml', ...feed, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
