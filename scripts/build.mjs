// Builds main, preload and renderer with electron-vite into out/. Works without the Electron
// runtime (the renderer is also served by the headless node): electron-vite only needs the major
// version, which package.json pins.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);

export function buildApp() {
  const { devDependencies } = require('../package.json');
  const env = { ...process.env, ELECTRON_MAJOR_VER: process.env.ELECTRON_MAJOR_VER ?? devDependencies.electron.split('.')[0] };
  const result = spawnSync(process.execPath, [path.join(path.dirname(require.resolve('electron-vite/package.json')), 'bin', 'electron-vite.js'), 'build'], { stdio: 'inherit', env });
  if (result.status !== 0) throw new Error(`electron-vite build failed (exit ${result.status})`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildApp();
