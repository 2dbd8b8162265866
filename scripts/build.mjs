// Builds main (with the compiled `cohort` CLI, out/main/cli.js), preload and renderer with
// electron-vite into out/. Works without the Electron runtime (the renderer is also served by the
// headless node): electron-vite only needs the major version, which package.json pins.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BUILT_MARKER = path.join(ROOT, 'out', 'renderer', 'index.html');
// main bundles the node runtime, so any source change can matter
const SOURCES = ['src', 'electron.vite.config.ts', 'svelte.config.js', 'package-lock.json'];

export function buildApp() {
  const { devDependencies } = require('../package.json');
  const env = { ...process.env, ELECTRON_MAJOR_VER: process.env.ELECTRON_MAJOR_VER ?? devDependencies.electron.split('.')[0] };
  const result = spawnSync(process.execPath, [path.join(path.dirname(require.resolve('electron-vite/package.json')), 'bin', 'electron-vite.js'), 'build'], { stdio: 'inherit', env, cwd: ROOT });
  if (result.status !== 0) throw new Error(`electron-vite build failed (exit ${result.status})`);
}

function newestMtime(p) {
  const stat = fs.statSync(p, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(p).map((name) => newestMtime(path.join(p, name))));
}

/** Why the build in out/ must be redone, or undefined when it is current. */
export function buildOutdated() {
  const built = fs.statSync(BUILT_MARKER, { throwIfNoEntry: false });
  if (!built) return 'the dashboard has not been built yet';
  const changed = SOURCES.find((s) => newestMtime(path.join(ROOT, s)) > built.mtimeMs);
  return changed ? `${changed} changed since the last build` : undefined;
}

/** Builds only when out/ is missing or older than its sources. */
export function ensureBuilt(log = console.log) {
  const why = buildOutdated();
  if (why === undefined) return;
  log(`Building the app (${why})…`);
  buildApp();
}

// `--if-outdated` (npm pack's prepack): reuse a current build, as `npm start` does
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--if-outdated')) ensureBuilt();
  else buildApp();
}
