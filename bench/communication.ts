// Communication (issue 20): the same swarm trained four times on the bundled corpus, `cohort run`
// child processes on loopback with the same seed and about the same samples, each peer's upload capped
// at 20 Mbit/s: plain gradient averaging and PowerSGD (same global batch, steps and schedule), and
// DiLoCo (H inner steps of one micro-batch per round, rounds for the same samples) without and with
// --outer-overlap (the one-step-delayed outer update), all with fp16 on the wire. Bytes each peer sent in averaging rounds (its `Averaged … MB sent` lines) per sample
// processed, and the final model's held-out MLM loss. Last line: `powersgd_bytes_ratio` and
// `diloco_bytes_ratio` (bytes per sample, plain ÷ mode; goals ≥ 8 and ≥ 100), `powersgd_loss_ratio`
// and `diloco_loss_ratio` (final loss, mode ÷ plain; goal ≤ 1.05) and `diloco_utilisation` (the
// peers' compute seconds ÷ their seconds from first micro-batch to last step; goal ≥ 0.9), and the
// same three for DiLoCo with the overlap (`diloco_overlap_*`).
//   npm run bench -- communication [--preset base] [--peers 4] [--steps 30] [--micro-batch 4] [--rank 32] [--lr 0.02] [--inner-steps 40]
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
    'inner-steps': { type: 'string', default: '40' },
  },
});
const peers = Number(values.peers);
const steps = Number(values.steps);
const micro = Number(values['micro-batch']);
const innerSteps = Number(values['inner-steps']);
for (const [name, v] of [['peers', peers], ['steps', steps], ['micro-batch', micro], ['inner-steps', innerSteps]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer, got ${v}`);
}
if (peers < 2) throw new Error('--peers must be at least 2: one peer averages with nobody');
const globalBatch = micro * peers * 4; // each peer: about 4 micro-batches per swarm step
const warmup = String(Math.max(1, Math.floor(steps / 10)));
// DiLoCo: a round is H micro-batches per peer, so the plain run's 4 micro-batches per step make steps·4/H rounds
const rounds = Math.max(1, Math.round((steps * 4) / innerSteps));
/** 20 Mbit/s in KiB/s: the volunteer uplink. */
const UPLINK_KIB_S = String(Math.floor(20e6 / 8 / 1024));
const SENT = /Averaged (?:pseudo-)?gradients with \d+ peers \([\d.]+ MB on the wire, ([\d.e+-]+) MB sent/g;

interface Outcome {
  /** Bytes sent in gradient rounds per sample processed, over every peer. */
  bytesPerSample: number;
  loss: number;
  averaged: number;
  seconds: number;
  /** The peers' compute seconds ÷ their training seconds. */
  utilisation: number;
}

type Mode = 'plain' | 'powersgd' | 'diloco' | 'diloco-overlap';

/** Bytes a peer sent in its gradient rounds, from its log lines. */
function bytesSent(c: Child): number {
  return [...c.stderr.matchAll(SENT)].reduce((n, m) => n + Number(m[1]) * 1e6, 0);
}

async function train(root: string, template: string, mode: Mode): Promise<Outcome> {
  const dirs = Array.from({ length: peers + 1 }, (_, i) => {
    const dir = path.join(root, `${mode}${i}`);
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  });
  const common = ['--preset', values.preset, '--batch-size', String(micro), '--lr', values.lr, '--seed', '0', '--grad-compression', 'fp16'];
  // DiLoCo's target batch is twice a round's samples: H ends each round, and the schedule counts rounds
  const diloco = mode === 'diloco' || mode === 'diloco-overlap';
  const run = diloco
    ? [...common, '--outer-optimizer', 'diloco', '--inner-steps', String(innerSteps), '--target-batch-size', String(2 * peers * innerSteps * micro), '--max-epochs', String(rounds), '--warmup-steps', '1', '--total-steps', String(rounds + 1), ...(mode === 'diloco-overlap' ? ['--outer-overlap'] : [])]
    : [...common, '--grad-averager', mode, '--powersgd-rank', values.rank, '--target-batch-size', String(globalBatch), '--max-epochs', String(steps), '--warmup-steps', warmup, '--total-steps', String(steps + 1)];
  const local = ['--upload-limit', UPLINK_KIB_S, '--threads', '1', '--matchmaking-time', '3', '--target-group-size', String(peers), '--refresh', '1', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info'];
  const started = Date.now();
  const model = path.join(root, `${mode}-model`);
  const first = cohort(['run', '--run-id', `communication-${mode}`, '--data-dir', dirs[0]!, '--out', model, ...run, ...local]);
  const code = await joinCode(first);
  const others = dirs.slice(1, peers).map((dir) => cohort(['run', '--join', code, '--data-dir', dir, ...run, ...local]));
  const all = [first, ...others];
  await Promise.all(all.map((c, i) => must(c, `${mode} peer ${i}`)));
  const seconds = (Date.now() - started) / 1000;
  const summaries = all.map((c) => JSON.parse(c.stdout.trim().split('\n').at(-1)!) as { samples: number; averaged: number; computeSeconds: number; trainingSeconds: number });
  const samples = summaries.reduce((n, s) => n + s.samples, 0);
  const utilisation = summaries.reduce((n, s) => n + s.computeSeconds, 0) / summaries.reduce((n, s) => n + s.trainingSeconds, 0);
  const bytes = all.reduce((n, c) => n + bytesSent(c), 0);
  const loss = await evaluate(model, dirs[peers]!);
  const averaged = summaries[0]!.averaged;
  console.log(`${mode}: ${averaged} of ${diloco ? rounds : steps} epochs averaged on peer 0, ${(bytes / 1e6).toFixed(2)} MB sent in averaging rounds for ${samples} samples (${(bytes / samples).toFixed(0)} B/sample), held-out MLM loss ${loss.toFixed(4)}, compute utilisation ${utilisation.toFixed(3)}, ${seconds.toFixed(0)} s`);
  return { bytesPerSample: bytes / samples, loss, averaged, seconds, utilisation };
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-communication-'));
try {
  const template = path.join(root, 'template');
  await must(cohort(['data', 'prepare', '--data-dir', template, '--log-level', 'warn']), 'data prepare');
  console.log(`${values.preset} preset, bundled corpus: ${peers} peers × micro-batch ${micro}, global batch ${globalBatch}, ${steps} steps, LAMB lr ${values.lr}, fp16 on the wire, uploads capped at ${UPLINK_KIB_S} KiB/s; PowerSGD rank ${values.rank}; DiLoCo H ${innerSteps}, ${rounds} rounds; loopback, load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`);
  const plain = await train(root, template, 'plain');
  const powersgd = await train(root, template, 'powersgd');
  const diloco = await train(root, template, 'diloco');
  const overlap = await train(root, template, 'diloco-overlap');
  const bytesRatio = plain.bytesPerSample / powersgd.bytesPerSample;
  const lossRatio = powersgd.loss / plain.loss;
  const dilocoBytesRatio = plain.bytesPerSample / diloco.bytesPerSample;
  const dilocoLossRatio = diloco.loss / plain.loss;
  console.log(`PowerSGD sends ${bytesRatio.toFixed(2)}× fewer bytes per sample (goal ≥ 8) at ${lossRatio.toFixed(4)}× the final loss (goal ≤ 1.05)`);
  console.log(`DiLoCo sends ${dilocoBytesRatio.toFixed(2)}× fewer bytes per sample (goal ≥ 100) at ${dilocoLossRatio.toFixed(4)}× the final loss (goal ≤ 1.05), compute utilisation ${diloco.utilisation.toFixed(3)} (goal ≥ 0.9); with the overlap ${(plain.bytesPerSample / overlap.bytesPerSample).toFixed(2)}×, ${(overlap.loss / plain.loss).toFixed(4)}×, utilisation ${overlap.utilisation.toFixed(3)}`);
  reportJson({
    powersgd_bytes_ratio: bytesRatio,
    powersgd_loss_ratio: lossRatio,
    diloco_bytes_ratio: dilocoBytesRatio,
    diloco_loss_ratio: dilocoLossRatio,
    diloco_utilisation: diloco.utilisation,
    diloco_overlap_bytes_ratio: plain.bytesPerSample / overlap.bytesPerSample,
    diloco_overlap_loss_ratio: overlap.loss / plain.loss,
    diloco_overlap_utilisation: overlap.utilisation,
    plain_bytes_per_sample: plain.bytesPerSample,
    powersgd_bytes_per_sample: powersgd.bytesPerSample,
    diloco_bytes_per_sample: diloco.bytesPerSample,
    plain_mlm_loss: plain.loss,
    powersgd_mlm_loss: powersgd.loss,
    diloco_mlm_loss: diloco.loss,
    diloco_overlap_mlm_loss: overlap.loss,
    plain_averaged_steps: plain.averaged,
    powersgd_averaged_steps: powersgd.averaged,
    diloco_averaged_rounds: diloco.averaged,
    diloco_overlap_averaged_rounds: overlap.averaged,
    plain_utilisation: plain.utilisation,
    preset: values.preset,
    peers,
    steps,
    rank: Number(values.rank),
    inner_steps: innerSteps,
    diloco_rounds: rounds,
  });
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
