// Robust aggregation (issue 23): 4 in-process peers on loopback all-reduce real gradients of the tiny
// preset on the bundled corpus (prepared into a temporary directory with `cohort data prepare`; each
// peer: 4 micro-batches of 4 sequences of 128 tokens from its own stream, onnxruntime CPU, one
// thread), every aggregation in turn, same gradients, same warm connections.
// - robust_overhead: median round time with the default robust aggregation ÷ with the plain weighted
//   mean, honest rounds (goal ≤ 1.2).
// - attack_deviation: ‖honest peers' average − honest-only average‖ ÷ ‖honest-only average‖ with one
//   attacker among 4 (its weight bounded like the others': what progress records give), the worse of
//   two attacks: the (1e7 in every value) and sign flip (−10 × its real gradient) (goal ≤ 0.1).
//   attack_deviation_inside: the same for an attacker that stays among the honest gradients (sign
//   flip ×1: its distance from the others is like theirs), which no reduction can tell apart; it is
//   bounded by the honest gradients' own spread, printed too.
// - loss_ratio_robust: a short collaborative training (4 peers, LAMB, same data and seeds) whose
//   gradients are all-reduced with the default robust aggregation, ÷ the same with the plain mean:
//   held-out MLM loss after the last step (goal ≤ 1.05). In process, not through `cohort run`
//   (bench/convergence.ts), whose option for the aggregation belongs to the run settings.
//   npm run bench -- robustness [--rounds 5] [--steps 20]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createAverager, type Aggregation, type Averager } from '../src/averaging/index.js';
import { DEFAULT_AGGREGATION } from '../src/averaging/constants.js';
import { PRESETS } from '../src/engine/albert/config.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import { clipGradNorm, createOptimizer } from '../src/engine/optim/index.js';
import { OrtBackend } from '../src/engine/ort-backend.js';
import type { ParameterSet } from '../src/engine/params.js';
import type { AlbertBatch } from '../src/engine/batch.js';
import { openBatchStream, type BatchStream } from '../src/data/index.js';
import { openStore } from '../src/store/index.js';
import { createSwarmNode, type SwarmNode } from '../src/swarm/index.js';
import { median, reportJson } from './_report.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, steps: { type: 'string', default: '20' } } });
const rounds = Number(values.rounds);
const steps = Number(values.steps);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 100) throw new Error(`--rounds ${values.rounds}: an integer from 1 to 100`);
if (!Number.isInteger(steps) || steps < 1 || steps > 1000) throw new Error(`--steps ${values.steps}: an integer from 1 to 1000`);

const PEERS = 4;
const MICRO = 4;
const BATCH = 4;
const SEQ = 128;
const LR = 0.02;
const ROBUST: Aggregation = DEFAULT_AGGREGATION;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-robustness-'));
execFileSync(process.execPath, [path.resolve('bin/cohort.js'), 'data', 'prepare', '--data-dir', dataDir, '--log-level', 'warn'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 });
const store = openStore(dataDir);
const stream = (peer: string, seed: number, batchSize = BATCH): BatchStream => openBatchStream({ store, batchSize, seqLen: SEQ, seed, peerId: peer, worker: false });
const streams: BatchStream[] = [];
const opened = (s: BatchStream): BatchStream => (streams.push(s), s);
const config = { ...PRESETS.tiny, vocabSize: opened(stream('probe', 0)).vocabSize };
const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });

/** `count` batches read ahead from `data` (so two trainings can see the very same ones). */
async function take(data: BatchStream, count: number): Promise<AlbertBatch[]> {
  const out: AlbertBatch[] = [];
  for (let i = 0; i < count; i++) {
    const next = await data.next();
    if (next.done) throw new Error('the batch stream ended');
    out.push(next.value);
  }
  return out;
}

/** A peer's gradient: the mean over its MICRO micro-batches. */
async function peerGradient(params: ParameterSet, batches: readonly AlbertBatch[]): Promise<{ grad: Float32Array; loss: number }> {
  const sum = new Float32Array(params.size);
  let loss = 0;
  for (const batch of batches) {
    const r = await backend.forwardBackward(params, batch);
    r.grads.data.forEach((g, i) => (sum[i]! += g / MICRO));
    loss += r.mlmLoss / MICRO;
  }
  return { grad: sum, loss };
}

async function startNodes(runId: string): Promise<SwarmNode[]> {
  const init = { runId, listen: ['/ip4/127.0.0.1/tcp/0'], initialQuerySelfIntervalMs: 50, inboundConnectionsPerHostPerSecond: 100 };
  const first = await createSwarmNode(init);
  const rest = await Promise.all(Array.from({ length: PEERS - 1 }, () => createSwarmNode({ ...init, initialPeers: first.multiaddrs() })));
  const nodes = [first, ...rest];
  const deadline = Date.now() + 60_000;
  while (!nodes.every((n) => n.reachability === 'public' && n.stats().routingTableSize >= 2)) {
    if (Date.now() > deadline) throw new Error('the 4 bench peers did not all serve the DHT within 60 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  return nodes;
}

function averagersFor(nodes: readonly SwarmNode[], aggregation: Aggregation): Averager[] {
  return nodes.map((node) => createAverager(node, { prefix: `g-${aggregation}`, aggregation, targetGroupSize: PEERS, matchmakingTimeMs: 15_000, averagingExpirationMs: 20_000, averagingTimeoutMs: 60_000, pollIntervalMs: 100 }));
}

let epoch = 0;
/** One all-reduce of `vectors` (weight 1 each, bound 1): every peer's result vector and the round's time (slowest peer, ms). */
async function round(avg: readonly Averager[], vectors: readonly Float32Array[]): Promise<{ results: Float32Array[]; ms: number }> {
  const e = epoch++;
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: e, weight: 1, weightBound: () => 1, expectedPeers: PEERS })));
  return {
    results: results.map((r, i) => {
      if (!r.ok) throw new Error(`peer ${i}, epoch ${e}: ${r.reason}`);
      if (r.status !== 'complete') throw new Error(`peer ${i}, epoch ${e}: ${JSON.stringify(r.failedParts)}`);
      return r.vector;
    }),
    ms: Math.max(...results.map((r) => (r.ok ? r.durationMs : 0))),
  };
}

function mean(vectors: readonly Float32Array[]): Float64Array {
  const out = new Float64Array(vectors[0]!.length);
  for (const v of vectors) v.forEach((x, i) => (out[i]! += x / vectors.length));
  return out;
}

function relativeDeviation(got: Float32Array, want: Float64Array): number {
  let d = 0;
  let w = 0;
  got.forEach((v, i) => {
    d += (v - want[i]!) ** 2;
    w += want[i]! ** 2;
  });
  return Math.sqrt(d / w);
}

const nodes = await startNodes('bench-robustness');
const aggregations: Aggregation[] = ['mean', 'centered-clip', 'trimmed-mean'];
const averagers = new Map(aggregations.map((a) => [a, averagersFor(nodes, a)]));
try {
  const params = initAlbertParams(config, 0);
  const honest: Array<{ grad: Float32Array }> = [];
  for (let p = 0; p < PEERS; p++) honest.push(await peerGradient(params, await take(opened(stream(`honest-${p}`, 100 + p)), MICRO)));
  const grads = honest.map((h) => h.grad);
  console.log(`tiny preset, vocabulary ${config.vocabSize} (${params.size} values), bundled corpus, ${PEERS} peers × ${MICRO} micro-batches of ${BATCH}×${SEQ}; robust default: ${ROBUST}`);

  // honest rounds: every aggregation in turn, so each sees the same load
  const times = new Map<Aggregation, number[]>(aggregations.map((a) => [a, []]));
  for (const a of aggregations) await round(averagers.get(a)!, grads); // warm-up: connections, JIT
  // the order turns each round, so no aggregation always follows the same one (the garbage and the
  // stragglers of a slow round land in the next)
  for (let r = 0; r < rounds; r++) for (let k = 0; k < aggregations.length; k++) {
    const a = aggregations[(r + k) % aggregations.length]!;
    times.get(a)!.push((await round(averagers.get(a)!, grads)).ms);
  }
  const honestMean = mean(grads);
  for (const a of aggregations) {
    const { results } = await round(averagers.get(a)!, grads);
    console.log(`${a.padEnd(13)} honest round ${median(times.get(a)!).toFixed(0)} ms (median of ${rounds}), ${(median(times.get(a)!) / median(times.get('mean')!)).toFixed(3)}× mean; deviation from the mean ${relativeDeviation(results[0]!, honestMean).toExponential(2)}`);
  }
  const spread = Math.sqrt(grads.reduce((a, g) => a + g.reduce((b, v, i) => b + (v - honestMean[i]!) ** 2, 0), 0) / PEERS);
  const norm = Math.sqrt(honestMean.reduce((a, v) => a + v * v, 0));
  console.log(`honest gradients: ‖mean‖ ${norm.toExponential(3)}, rms distance of a peer's gradient from it ${spread.toExponential(3)} (${(spread / norm).toFixed(2)}×)`);

  // one attacker (peer 0, weight bounded like the others) among 4
  const attacks: Array<[string, Float32Array]> = [
    ['1e7 everywhere', new Float32Array(params.size).fill(1e7)],
    ['sign flip ×10', grads[0]!.map((v) => -10 * v)],
    ['sign flip ×1', grads[0]!.map((v) => -v)],
  ];
  const honestOnly = mean(grads.slice(1));
  const deviation = new Map<Aggregation, number>(aggregations.map((a) => [a, 0]));
  const inside = new Map<Aggregation, number>();
  for (const [what, poison] of attacks) {
    for (const a of aggregations) {
      const { results } = await round(averagers.get(a)!, [poison, ...grads.slice(1)]);
      const d = Math.max(...results.slice(1).map((v) => relativeDeviation(v, honestOnly)));
      if (what === 'sign flip ×1') inside.set(a, d);
      else deviation.set(a, Math.max(deviation.get(a)!, d));
      console.log(`attack "${what}", ${a}: honest peers' average is ${d.toExponential(3)} × ‖honest-only average‖ away from it`);
    }
  }

  // short collaborative trainings from the same start, same data: plain mean vs the robust default
  const heldOut = await take(opened(stream('robustness-eval', 987_654, 16)), 4);
  const trainBatches = await Promise.all(Array.from({ length: PEERS }, async (_, i) => take(opened(stream(`train-${i}`, 500 + i)), steps * MICRO)));
  const trainWith = async (a: Aggregation): Promise<number> => {
    const p = initAlbertParams(config, 0);
    const opt = createOptimizer(p, { kind: 'lamb' });
    const avg = p.zerosLike();
    for (let s = 0; s < steps; s++) {
      const g: Array<{ grad: Float32Array }> = [];
      for (const batches of trainBatches) g.push(await peerGradient(p, batches.slice(s * MICRO, (s + 1) * MICRO)));
      const { results } = await round(averagers.get(a)!, g.map((x) => x.grad));
      avg.data.set(results[0]!);
      clipGradNorm(avg, 1);
      opt.step(p, avg, LR * Math.min(1, (s + 1) / Math.max(1, Math.floor(steps / 10))));
    }
    let loss = 0;
    for (const b of heldOut) loss += (await backend.forwardBackward(p, b)).mlmLoss / heldOut.length;
    return loss;
  };
  const plainLoss = await trainWith('mean');
  const robustLoss = await trainWith(ROBUST);
  console.log(`${steps} collaborative steps: held-out MLM loss ${plainLoss.toFixed(4)} with the mean, ${robustLoss.toFixed(4)} with ${ROBUST}`);

  const overhead = median(times.get(ROBUST)!) / median(times.get('mean')!);
  console.log(`robust_overhead ${overhead.toFixed(3)} (goal ≤ 1.2), attack_deviation ${deviation.get(ROBUST)!.toExponential(3)} (goal ≤ 0.1), loss_ratio_robust ${(robustLoss / plainLoss).toFixed(4)} (goal ≤ 1.05)`);
  reportJson({
    robust_overhead: overhead,
    attack_deviation: deviation.get(ROBUST)!,
    attack_deviation_inside: inside.get(ROBUST)!,
    attack_deviation_inside_mean: inside.get('mean')!,
    honest_spread: spread / norm,
    loss_ratio_robust: robustLoss / plainLoss,
    aggregation: ROBUST,
    overhead_trimmed_mean: median(times.get('trimmed-mean')!) / median(times.get('mean')!),
    attack_deviation_trimmed_mean: deviation.get('trimmed-mean')!,
    attack_deviation_mean: deviation.get('mean')!,
    round_ms_mean: median(times.get('mean')!),
    values: params.size,
    steps,
  });
} finally {
  await Promise.all([...averagers.values()].flat().map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  await backend.close();
  for (const s of streams) await s.close();
  store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
