// Convergence: the tiny preset on the bundled corpus, 3 collaborating peers (`cohort run` child
// processes on loopback) vs one node (`cohort train`) with the same global batch, number of steps,
// learning-rate schedule and seed. Both final models are scored on the same held-out batches; the
// last line's `loss_ratio` is collaborative ÷ single-node MLM loss (goal: ≤ 1.05).
//   npm run bench -- convergence [--steps 60] [--micro-batch 4] [--lr 0.02] [--peers 3]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cohort, evaluate, joinCode, must } from './_cohort-runs.js';
import { reportJson } from './_report.js';

const { values } = parseArgs({ options: { steps: { type: 'string', default: '60' }, 'micro-batch': { type: 'string', default: '4' }, lr: { type: 'string', default: '0.02' }, peers: { type: 'string', default: '3' } } });
const steps = Number(values.steps);
const micro = Number(values['micro-batch']);
const peers = Number(values.peers);
const lr = values.lr;
const globalBatch = micro * peers * 4; // each peer: about 4 micro-batches per swarm step
const warmup = String(Math.max(1, Math.floor(steps / 10)));
const QUIET = ['--log-level', 'warn'];

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-convergence-'));
try {
  const template = path.join(root, 'template');
  await must(cohort(['data', 'prepare', '--data-dir', template, ...QUIET]), 'data prepare');
  const dirs = Array.from({ length: peers + 2 }, (_, i) => {
    const dir = path.join(root, `node${i}`);
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  });
  console.log(`tiny preset, bundled corpus: ${peers} peers × micro-batch ${micro} vs one node, global batch ${globalBatch}, ${steps} steps, LAMB lr ${lr}, warmup ${warmup}`);
  const started = Date.now();
  const train = ['--preset', 'tiny', '--target-batch-size', String(globalBatch), '--batch-size', String(micro), '--max-epochs', String(steps), '--lr', lr, '--warmup-steps', warmup, '--total-steps', String(steps + 1), '--seed', '0', '--threads', '1', '--matchmaking-time', '3', '--target-group-size', String(peers), '--refresh', '1', '--listen', '/ip4/127.0.0.1/tcp/0', ...QUIET];
  const first = cohort(['run', '--run-id', 'convergence', '--data-dir', dirs[0]!, '--out', path.join(root, 'collab-model'), ...train]);
  const code = await joinCode(first);
  const others = dirs.slice(1, peers).map((dir) => cohort(['run', '--join', code, '--data-dir', dir, ...train]));
  const single = cohort(['train', '--preset', 'tiny', '--steps', String(steps), '--batch-size', String(globalBatch), '--lr', lr, '--warmup-steps', warmup, '--seed', '0', '--threads', '1', '--data', 'prepared', '--data-dir', dirs[peers]!, '--out', path.join(root, 'single-model'), ...QUIET]);
  await Promise.all([must(first, 'peer 0'), ...others.map((c, i) => must(c, `peer ${i + 1}`)), must(single, 'single node')]);
  const summary = JSON.parse(first.stdout.trim().split('\n').at(-1)!) as { epoch: number; averaged: number; localFallbacks: number; samples: number };
  const seconds = (Date.now() - started) / 1000;
  const collabLoss = await evaluate(path.join(root, 'collab-model'), dirs[peers + 1]!);
  const singleLoss = await evaluate(path.join(root, 'single-model'), dirs[peers + 1]!);
  console.log(`collaborative: ${summary.epoch} swarm steps (${summary.averaged} averaged, ${summary.localFallbacks} local fallbacks on peer 0), held-out MLM loss ${collabLoss.toFixed(4)}`);
  console.log(`single node:   ${steps} steps, held-out MLM loss ${singleLoss.toFixed(4)}`);
  console.log(`ratio ${(collabLoss / singleLoss).toFixed(4)} (goal ≤ 1.05); ${seconds.toFixed(0)} s wall for both runs side by side`);
  reportJson({ collab_mlm_loss: collabLoss, single_mlm_loss: singleLoss, loss_ratio: collabLoss / singleLoss, steps, peers, global_batch: globalBatch, averaged_steps: summary.averaged, local_fallbacks: summary.localFallbacks, seconds });
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
