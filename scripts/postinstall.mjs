// Fetches the two large binaries Cohort can use but never needs: the Electron runtime (for the
// desktop window) and onnxruntime-node's CUDA execution provider (Linux x64; Windows builds bundle
// theirs). Both come from outside the npm registry, so either download may be impossible (offline
// machines, CI, locked-down servers): a failure is a warning and the install goes on; the headless
// node and the CPU provider still work. `npx cohort doctor` reports what is present.
// Skip either with ELECTRON_SKIP_BINARY_DOWNLOAD=1 or ONNXRUNTIME_NODE_INSTALL=skip.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const TEN_MINUTES = 10 * 60_000;

function packageDir(name) {
  try {
    return path.dirname(require.resolve(`${name}/package.json`));
  } catch {
    return undefined; // not installed (e.g. a production install without dev dependencies)
  }
}

/** Runs a package's own installer; returns undefined on success or a one-line reason. */
function runInstaller(script, env) {
  const result = spawnSync(process.execPath, [script], { env, encoding: 'utf8', timeout: TEN_MINUTES });
  if (result.status === 0) return undefined;
  const errorLine = `${result.stderr}`.split('\n').find((l) => /^\w*Error\b/.test(l.trim()));
  return result.error?.message ?? errorLine?.trim() ?? `exit ${result.status}`;
}

function installElectron() {
  if (['1', 'true'].includes(process.env.ELECTRON_SKIP_BINARY_DOWNLOAD ?? '')) return console.log('cohort: Electron download skipped (ELECTRON_SKIP_BINARY_DOWNLOAD).');
  const dir = packageDir('electron');
  if (!dir) return;
  const failure = runInstaller(path.join(dir, 'install.js'), process.env);
  if (failure === undefined) return console.log('cohort: Electron runtime installed.');
  console.warn(`cohort: the Electron runtime could not be downloaded (${failure}).`);
  console.warn('cohort: `npm start` will run the headless node and serve the dashboard in your browser instead.');
}

function installCudaProvider() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return;
  const flag = process.env.ONNXRUNTIME_NODE_INSTALL;
  if (flag === 'skip') return console.log('cohort: CUDA provider download skipped (ONNXRUNTIME_NODE_INSTALL=skip).');
  const dir = packageDir('onnxruntime-node');
  if (!dir) return;
  const provider = path.join(dir, 'bin', 'napi-v6', 'linux', 'x64', 'libonnxruntime_providers_cuda.so');
  if (fs.existsSync(provider)) return; // onnxruntime-node's own postinstall fetched it (a global install runs it)
  // package.json's allowScripts keeps npm (11.16+) from running onnxruntime-node's own postinstall in this
  // checkout (it fails the whole install when offline); run it here instead. '1' means "install what this
  // platform needs"; its parser ignores a value like 'cuda12' and, run from an npm script, then exits 0
  // without downloading, so success is checked on disk too.
  const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: '1' };
  const failure = runInstaller(path.join(dir, 'script', 'install.js'), env) ?? (fs.existsSync(provider) ? undefined : `the installer finished but ${provider} is missing`);
  if (failure === undefined) return console.log('cohort: onnxruntime-node CUDA provider installed.');
  console.warn(`cohort: the CUDA provider for onnxruntime-node could not be downloaded (${failure}).`);
  console.warn('cohort: training will use the CPU; run `npx cohort doctor` for details, or `npm rebuild` once online.');
}

installElectron();
installCudaProvider();
