// Communication (issue 20): the same swarm trained up to four times on the bundled corpus, `cohort run`
// child processes on loopback with the same seed and the same samples, each peer's upload capped at
// 20 Mbit/s: plain gradient averaging and PowerSGD (fp16 on the wire; same global batch, steps and
// schedule: a peer's share of a step's target is 4 micro-batches), and DiLoCo without and with
// --outer-overlap (the one-step-delayed outer update), its pseudo-gradient in 4 bits (blockwise4,
// --diloco-compression). DiLoCo follows the samples the plain run processed (a plain epoch ends once
// the swarm's estimate, its reports extrapolated by throughput, reaches the target: often before its
// samples do): its inner step takes the plain run's samples per peer per step, in whole micro-batches
// accumulated (--inner-batch-size: a volunteer keeps the micro-batch its memory allows), and steps ÷ H
// rounds share the plain run's samples. A round's target batch is its share, which the swarm gathers
// together: a slower peer takes fewer inner steps and a faster more (at most twice the mean) instead
// of waiting for the others (the "target of samples per round so slow peers do fewer steps").
// At equal samples the bytes ratio is (plain steps ÷ DiLoCo rounds) × (fp16 ÷ the codec's bytes per
// value): 3.56H with blockwise4's 4.5 bits (2H with blockwise8, at the goal's edge at H = 50).
// Bytes each peer sent in averaging rounds (its `Averaged … MB sent` lines) per sample processed, and
// the final model's held-out MLM loss. Last line: `powersgd_bytes_ratio` and `diloco_bytes_ratio`
// (bytes per sample, plain ÷ mode; goals ≥ 8 and ≥ 100), `powersgd_loss_ratio` and
// `diloco_loss_ratio` (final loss, mode ÷ plain; goal ≤ 1.05) and `diloco_utilisation` (the peers'
// compute seconds ÷ their seconds from the end of their first micro-batch, which builds the
// onnxruntime session, to their last step; goal ≥ 0.9), the same three for the overlapped run
// (`diloco_overlap_*`), each mode's samples; the keys of a mode left out of --modes are absent.
//   npm run bench -- communication [--preset base] [--peers 4] [--steps 100] [--micro-batch 4] [--rank 32] [--lr 0.02] [--inner-steps 50] [--diloco-compression blockwise4] [--modes plain,powersgd,diloco,diloco-overlap]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cohort, evaluate, joinCode, must, type Child } from './_cohort-runs.js';
import { reportJson } from './_report.js';
import { COMPRESSIONS, type Compression } from '../src/averaging/compression.js';

const { values } = parseArgs({
  options: {
    preset: { type: 'string', default: 'base' },
    peers: { type: 'string', default: '4' },
    steps: { type: 'string', default: '100' },
    'micro-batch': { type: 'string', default: '4' },
    rank: { type: 'string', default: '32' },
    lr: { type: 'string', default: '0.02' },
    'inner-steps': { type: 'string', default: '50' },
    'diloco-compression': { type: 'string', default: 'blockwise4' },
    modes: { type: 'string', default: 'plain,powersgd,diloco,diloco-overlap' },
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
const MODES = ['plain', 'powersgd', 'diloco', 'diloco-overlap'] as const;
type Mode = (typeof MODES)[number];
const modes = values.modes.split(',') as Mode[];
for (const m of modes) if (!MODES.includes(m)) throw new Error(`--modes: unknown mode ${m}; known: ${MODES.join(', ')}`);
if (!modes.includes('plain')) throw new Error('--modes must include plain: every ratio is against it');
if (!COMPRESSIONS.includes(values['diloco-compression'] as Compression)) throw new Error(`--diloco-compression must be one of ${COMPRESSIONS.join(', ')}, got ${values['diloco-compression']}`);
const globalBatch = micro * peers * 4; // each peer: about 4 micro-batches per swarm step
const warmup = String(Math.max(1, Math.floor(steps / 10)));
// DiLoCo: an inner step takes a plain step's per-peer batch, so the plain run's steps make steps/H rounds of H
const rounds = Math.max(1, Math.round(steps / innerSteps));

/** How DiLoCo runs take the plain run's samples: its per-peer batch per step and its total, measured. */
interface DilocoShape {
  /** Samples per inner step: the plain run's per peer per step, in whole micro-batches. */
  innerBatch: number;
  /** Samples the swarm gathers per round: the plain run's ÷ rounds. */
  roundTarget: number;
}

/** A plain epoch ends once the swarm's estimate (reports extrapolated by throughput) reaches the target, often before its samples do: DiLoCo follows what plain processed. */
function dilocoShape(plainSamples: number): DilocoShape {
  const innerBatch = micro * Math.max(1, Math.round(plainSamples / (steps * peers * micro)));
  return { innerBatch, roundTarget: Math.max(innerBatch * peers, Math.round(plainSamples / rounds)) };
}
/** 20 Mbit/s in KiB/s: the volunteer uplink. */
const UPLINK_KIB_S = String(Math.floor(20e6 / 8 / 1024));
const SENT = /Averaged (?:pseudo-)?gradients with \d+ peers \([\d.]+ MB on the wire, ([\d.e+-]+) MB sent/g;

interface Outcome {
  /** Bytes sent in gradient rounds per sample processed, over every peer. */
  bytesPerSample: number;
  samples: number;
  loss: number;
  averaged: number;
  seconds: number;
  /** The peers' compute seconds ÷ their training seconds. */
  utilisation: number;
}

/** Bytes a peer sent in its gradient rounds, from its log lines. */
function bytesSent(c: Child): number {
  return [...c.stderr.matchAll(SENT)].reduce((n, m) => n + Number(m[1]) * 1e6, 0);
}

async function train(root: string, template: string, mode: Mode, shape?: DilocoShape): Promise<Outcome> {
  const dirs = Array.from({ length: peers + 1 }, (_, i) => {
    const dir = path.join(root, `${mode}${i}`);
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  });
  const common = ['--preset', values.preset, '--batch-size', String(micro), '--lr', values.lr, '--seed', '0'];
  // DiLoCo's target batch is a round's samples (H inner batches per peer) and its schedule counts rounds
  const diloco = mode === 'diloco' || mode === 'diloco-overlap';
  if (diloco && !shape) throw new Error(`${mode} follows the plain run's samples: run plain first`);
  const run = shape && diloco
    ? [...common, '--grad-compression', values['diloco-compression'], '--outer-optimizer', 'diloco', '--inner-batch-size', String(shape.innerBatch), '--inner-steps', String(2 * Math.ceil(shape.roundTarget / (peers * shape.innerBatch))), '--target-batch-size', String(shape.roundTarget), '--max-epochs', String(rounds), '--warmup-steps', '1', '--total-steps', String(rounds + 1), ...(mode === 'diloco-overlap' ? ['--outer-overlap'] : [])]
    : [...common, '--grad-compression', 'fp16', '--grad-averager', mode, ...(mode === 'powersgd' ? ['--powersgd-rank', values.rank] : []), '--target-batch-size', String(globalBatch), '--max-epochs', String(steps), '--warmup-steps', warmup, '--total-steps', String(steps + 1)];
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
  return { bytesPerSample: bytes / samples, samples, loss, averaged, seconds, utilisation };
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-communication-'));
try {
  const template = path.join(root, 'template');
  await must(cohort(['data', 'prepare', '--data-dir', template, '--log-level', 'warn']), 'data prepare');
  console.log(`${values.preset} preset, bundled corpus: ${peers} peers × micro-batch ${micro}, global batch ${globalBatch}, ${steps} steps, LAMB lr ${values.lr}, fp16 on the wire, uploads capped at ${UPLINK_KIB_S} KiB/s; PowerSGD rank ${values.rank}; DiLoCo H ${innerSteps}, ${rounds} rounds, ${values['diloco-compression']} on the wire; modes ${modes.join(', ')}; loopback, load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`);
  const plain = await train(root, template, 'plain');
  const shape = dilocoShape(plain.samples);
  if (modes.some((m) => m.startsWith('diloco'))) console.log(`DiLoCo: inner steps of ${shape.innerBatch} samples (plain: ${(plain.samples / (steps * peers)).toFixed(1)} per peer per step), rounds of ${shape.roundTarget} samples (${(shape.roundTarget / (peers * shape.innerBatch)).toFixed(1)} inner steps per peer on average)`);
  const outcomes = new Map<Mode, Outcome>([['plain', plain]]);
  for (const mode of MODES.filter((m) => m !== 'plain' && modes.includes(m))) outcomes.set(mode, await train(root, template, mode, shape));
  const figures: Record<string, number | string> = {};
  for (const [mode, o] of outcomes) {
    const key = mode.replace('-', '_');
    figures[`${key}_bytes_per_sample`] = o.bytesPerSample;
    figures[`${key}_mlm_loss`] = o.loss;
    figures[`${key}_samples`] = o.samples;
    figures[`${key}_averaged_${mode.startsWith('diloco') ? 'rounds' : 'steps'}`] = o.averaged;
    figures[`${key}_utilisation`] = o.utilisation;
    if (mode === 'plain') continue;
    figures[`${key}_bytes_ratio`] = plain.bytesPerSample / o.bytesPerSample;
    figures[`${key}_loss_ratio`] = o.loss / plain.loss;
    console.log(`${mode} sends ${(plain.bytesPerSample / o.bytesPerSample).toFixed(2)}× fewer bytes per sample than plain (goal ≥ ${mode === 'powersgd' ? 8 : 100}) at ${(o.loss / plain.loss).toFixed(4)}× the final loss (goal ≤ 1.05), compute utilisation ${o.utilisation.toFixed(3)}${mode === 'powersgd' ? '' : ' (goal ≥ 0.9)'}`);
  }
  reportJson({ ...figures, preset: values.preset, peers, steps, rank: Number(values.rank), ...(modes.some((m) => m.startsWith('diloco')) ? { inner_steps: innerSteps, inner_batch_size: shape.innerBatch, diloco_round_target: shape.roundTarget, diloco_compression: values['diloco-compression'], diloco_rounds: rounds } : {}), load_average: os.loadavg()[0]! });
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
