// Fetches onnxruntime-node's CUDA execution provider (Linux x64 only; Windows builds bundle theirs).
// onnxruntime-node's own postinstall is told to skip by .npmrc because it fails the whole `npm ci`
// when the download is impossible; here a failed download is a warning and the install goes on
// with the CPU provider. `cohort doctor` reports which providers actually load.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const userFlag = process.env.ONNXRUNTIME_NODE_INSTALL ?? process.env.COHORT_CUDA;

function main() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return;
  if (userFlag === 'skip' || userFlag === '0') {
    console.log('cohort: CUDA provider download skipped (ONNXRUNTIME_NODE_INSTALL=skip).');
    return;
  }
  let installer;
  try {
    installer = path.join(path.dirname(require.resolve('onnxruntime-node/package.json')), 'script', 'install.js');
  } catch {
    return; // onnxruntime-node not installed (e.g. a production install without it): nothing to add to
  }
  const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'cuda12' };
  delete env.npm_config_onnxruntime_node_install;
  const result = spawnSync(process.execPath, [installer], { env, encoding: 'utf8', timeout: 10 * 60_000 });
  if (result.status === 0) {
    console.log('cohort: onnxruntime-node CUDA provider installed.');
    return;
  }
  const reason = (result.error?.message ?? `${result.stderr}`.trim().split('\n').filter(Boolean).slice(-1)[0]) || `exit ${result.status}`;
  console.warn(`cohort: the CUDA provider for onnxruntime-node could not be downloaded (${reason}).`);
  console.warn('cohort: training will use the CPU; run `npx cohort doctor` for details, or `npm rebuild` once online.');
}

main();
