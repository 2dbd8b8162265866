// Communication (issue 20): the same swarm trained twice on the bundled corpus, `cohort run` child
// processes on loopback with the same seed, global batch, steps and schedule: plain gradient averaging
// and PowerSGD, both with fp16 on the wire. Bytes each peer sent in gradient rounds (its `Averaged
// gradients … MB sent` lines) per sample processed, and the final model's held-out MLM loss.
// Last line: `powersgd_bytes_ratio` (bytes per sample, plain ÷ PowerSGD; goal ≥ 8) and
// `powersgd_loss_ratio` (final loss, PowerSGD ÷ plain; goal ≤ 1.05). DiLoCo is not implemented.
//   npm run bench -- communication [--preset base] [--peers 4] [--steps 30] [--micro-batch 4] [--rank 32] [--lr 0.02]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cohort, evaluate, joinCode, must, type Child } from './_cohort-runs.js';
import { reportJson } from './_report.js';

const { values } = parseArgs({
  options: {
    preset: { type: 'string', default: 'base' },
    peers: { type: 'string', default: '4' },
    steps: { type: 'string', default: '30' },
    'micro-batch': { type: 'string', default: '4' },
    rank: { type: 'string', default: '32' },
    lr: { type: 'string', default: '0.02' },
  },
});
const peers = Number(values.peers);
const steps = Number(values.steps);
const micro = Number(values['micro-batch']);
for (const [name, v] of [['peers', peers], ['steps', steps], ['micro-batch', micro]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer, got ${v}`);
}
if (peers < 2) throw new Error('--peers must be at least 2: one peer averages with nobody');
const globalBatch = micro * peers * 4; // each peer: about 4 micro-batches per swarm step
const warmup = String(Math.max(1, Math.floor(steps / 10)));
const SENT = /Averaged gradients with \d+ peers \([\d.]+ MB on the wire, ([\d.e+-]+) MB sent/g;

interface Outcome {
  /** Bytes sent in gradient rounds per sample processed, over every peer. */
  bytesPerSample: number;
  loss: number;
  averaged: number;
  seconds: number;
}

/** Bytes a peer sent in its gradient rounds, from its log lines. */
function bytesSent(c: Child): number {
  return [...c.stderr.matchAll(SENT)].reduce((n, m) => n + Number(m[1]) * 1e6, 0);
}

async function train(root: string, template: string, mode: 'plain' | 'powersgd'): Promise<Outcome> {
  const dirs = Array.from({ length: peers + 1 }, (_, i) => {
    const dir = path.join(root, `${mode}${i}`);
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  });
  const run = ['--preset', values.preset, '--target-batch-size', String(globalBatch), '--batch-size', String(micro), '--max-epochs', String(steps), '--lr', values.lr, '--warmup-steps', warmup, '--total-steps', String(steps + 1), '--seed', '0', '--grad-compression', 'fp16', '--grad-averager', mode, '--powersgd-rank', values.rank];
  const local = ['--threads', '1', '--matchmaking-time', '3', '--target-group-size', String(peers), '--refresh', '1', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info'];
  const started = Date.now();
  const model = path.join(root, `${mode}-model`);
  const first = cohort(['run', '--run-id', `communication-${mode}`, '--data-dir', dirs[0]!, '--out', model, ...run, ...local]);
  const code = await joinCode(first);
  const others = dirs.slice(1, peers).map((dir) => cohort(['run', '--join', code, '--data-dir', dir, ...run, ...local]));
  const all = [first, ...others];
  await Promise.all(all.map((c, i) => must(c, `${mode} peer ${i}`)));
  const seconds = (Date.now() - started) / 1000;
  const summaries = all.map((c) => JSON.parse(c.stdout.trim().split('\n').at(-1)!) as { samples: number; averaged: number });
  const samples = summaries.reduce((n, s) => n + s.samples, 0);
  const bytes = all.reduce((n, c) => n + bytesSent(c), 0);
  const loss = await evaluate(model, dirs[peers]!);
  const averaged = summaries[0]!.averaged;
  console.log(`${mode}: ${averaged} of ${steps} steps averaged on peer 0, ${(bytes / 1e6).toFixed(2)} MB sent in gradient rounds for ${samples} samples (${(bytes / samples).toFixed(0)} B/sample), held-out MLM loss ${loss.toFixed(4)}, ${seconds.toFixed(0)} s`);
  return { bytesPerSample: bytes / samples, loss, averaged, seconds };
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-communication-'));
try {
  const template = path.join(root, 'template');
  await must(cohort(['data', 'prepare', '--data-dir', template, '--log-level', 'warn']), 'data prepare');
  console.log(`${values.preset} preset, bundled corpus: ${peers} peers × micro-batch ${micro}, global batch ${globalBatch}, ${steps} steps, LAMB lr ${values.lr}, fp16 on the wire; PowerSGD rank ${values.rank}; loopback, load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`);
  const plain = await train(root, template, 'plain');
  const powersgd = await train(root, template, 'powersgd');
  const bytesRatio = plain.bytesPerSample / powersgd.bytesPerSample;
  const lossRatio = powersgd.loss / plain.loss;
  console.log(`PowerSGD sends ${bytesRatio.toFixed(2)}× fewer bytes per sample (goal ≥ 8) at ${lossRatio.toFixed(4)}× the final loss (goal ≤ 1.05)`);
  reportJson({
    powersgd_bytes_ratio: bytesRatio,
    powersgd_loss_ratio: lossRatio,
    plain_bytes_per_sample: plain.bytesPerSample,
    powersgd_bytes_per_sample: powersgd.bytesPerSample,
    plain_mlm_loss: plain.loss,
    powersgd_mlm_loss: powersgd.loss,
    plain_averaged_steps: plain.averaged,
    powersgd_averaged_steps: powersgd.averaged,
    preset: values.preset,
    peers,
    steps,
    rank: Number(values.rank),
  });
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
