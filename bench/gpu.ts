/**
 * GPU training-step benchmark: ALBERT-large, one full local step as `cohort train` runs it (forward +
 * backward on onnxruntime's CUDA provider, gradient clipping, LAMB in TypeScript; fp16 at a
 * DynamicLossScaler's scale) at sequence lengths 128 and 512, fp32 and fp16, each at the largest
 * micro-batch that fits → sequences/s. Against NVIDIA DeepLearningExamples' BERT-large pretraining
 * (PyTorch, 1 GPU, seq 128, mixed precision: V100 224 seq/s, A100 580 seq/s; ALBERT-large needs about
 * BERT-large's FLOPs per token): gpu_vs_bert_ref = our fp16 seq-128 figure ÷ that of the same GPU
 * class, null where none is published for this GPU.
 * The PyTorch peer (bench/gpu_torch.py: the independent ALBERT of bench/engine_torch.py, clip, LAMB,
 * autocast fp16) runs the same shapes on the same GPU after ours: torch_* keys and gpu_vs_torch = ours ÷
 * torch, fp16 seq 128. Without a CUDA provider ours is not measured (reason says why), the PyTorch peer
 * still runs where a GPU and torch are, and it exits 0.
 * `--provider webgpu` measures onnxruntime-node's WebGPU provider (Vulkan on Linux) instead of CUDA, in fp32
 * (the only precision it trains in); `--batch B` times that micro-batch only (no search:
 * each probe builds a session, which costs WebGPU its shader compilation), `--seq-len S` one length.
 * Usage: npm run bench -- gpu [--steps N] [--max-batch B] [--batch B] [--seq-len 128|512] [--provider cuda|webgpu]
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { probeProvider } from '../src/doctor/ort-probe.js';
import { PRESETS } from '../src/engine/albert/config.js';
import type { Precision } from '../src/engine/albert/graph.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import { missingCudaProvider } from '../src/engine/cuda-install.js';
import { planGpuMicroBatch, queryGpus, type GpuInfo } from '../src/engine/gpu-memory.js';
import { DynamicLossScaler } from '../src/engine/loss-scaler.js';
import { formatBytes } from '../src/engine/memory-estimate.js';
import { createOptimizer } from '../src/engine/optim/index.js';
import { OrtBackend } from '../src/engine/ort-backend.js';
import { providerPrecisionProblem } from '../src/engine/providers.js';
import { Rng } from '../src/engine/rng.js';
import { syntheticBatch } from '../src/engine/synthetic.js';
import { trainStep } from '../src/engine/trainer.js';
import { median, reportJson } from './_report.js';
import { findTorchPython, torchEnv } from './_torch_check.js';

const config = PRESETS.large;
const SEQ_LENS = [128, 512] as const;
type GpuProvider = 'cuda' | 'webgpu';
const PRECISIONS = ['fp32', 'fp16'] as const satisfies readonly Precision[];

/** DeepLearningExamples BERT-large pretraining, PyTorch, 1 GPU, seq 128, mixed precision (seq/s), by GPU class. */
const BERT_LARGE_REFERENCE: ReadonlyArray<{ readonly pattern: RegExp; readonly gpu: string; readonly seqPerS: number }> = [
  { pattern: /V100/, gpu: 'V100', seqPerS: 224 },
  { pattern: /A100/, gpu: 'A100', seqPerS: 580 },
];

const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!(Number.isInteger(v) && v >= 1)) throw new Error(`${name}: ${process.argv[i + 1]} is not an integer ≥ 1`);
  return v;
};

/** Median seconds of `steps` timed training steps at micro-batch `b` (after one warm-up step that builds the session), or the error. */
async function timeSteps(provider: GpuProvider, seqLen: number, precision: Precision, b: number, steps: number): Promise<{ seconds: number } | { error: string }> {
  const params = initAlbertParams(config, 0);
  const grads = params.zerosLike();
  const optimizer = createOptimizer(params, { kind: 'lamb' });
  const scaler = precision === 'fp16' ? new DynamicLossScaler() : undefined;
  const batch = syntheticBatch(config, b, seqLen, new Rng(1));
  const backend = new OrtBackend(config, { provider, precision });
  try {
    const times: number[] = [];
    for (let i = 0; i <= steps; i++) {
      const start = performance.now();
      await trainStep(backend, optimizer, params, grads, batch, 1e-4, 1, scaler);
      if (i > 0) times.push((performance.now() - start) / 1000);
    }
    return { seconds: median(times) };
  } catch (err) {
    return { error: (err as Error).message.split('\n')[0]! };
  } finally {
    await backend.close();
  }
}

/**
 * The largest micro-batch that runs: from the memory estimate's guess (1 without nvidia-smi), doubling
 * while steps run and bisecting between the largest that ran and the smallest that failed (bounded:
 * about 2·log2(maxBatch) probes of one timed step each), then timed with the full step count.
 */
async function largestFitting(provider: GpuProvider, seqLen: number, precision: Precision, gpu: GpuInfo | undefined, maxBatch: number, steps: number) {
  const plan = gpu ? planGpuMicroBatch(config, { seqLen, precision, maxBatchSize: maxBatch }, gpu) : undefined;
  const guess = plan?.fits ? plan.batchSize : null;
  let [lo, hi] = [0, maxBatch + 1]; // largest that ran, smallest that failed
  let lastError = '';
  let b = guess ?? 1;
  for (let probes = 0; hi - lo > 1 && probes < 2 * Math.ceil(Math.log2(maxBatch + 1)) + 2; probes++) {
    const r = await timeSteps(provider, seqLen, precision, b, 1);
    if ('seconds' in r) lo = b;
    else [hi, lastError] = [b, r.error];
    b = hi > maxBatch ? Math.min(2 * lo, maxBatch) : Math.floor((lo + hi) / 2);
    if (b <= lo || b >= hi) break;
  }
  if (lo === 0) return { batchSize: 0, seqPerS: null, guess, error: lastError };
  const timed = await timeSteps(provider, seqLen, precision, lo, steps);
  if ('error' in timed) return { batchSize: lo, seqPerS: null, guess, error: timed.error };
  return { batchSize: lo, seqPerS: lo / timed.seconds, guess, error: null };
}

/** One micro-batch size timed as given (`--batch`). */
async function fixedBatch(provider: GpuProvider, seqLen: number, precision: Precision, b: number, steps: number) {
  const timed = await timeSteps(provider, seqLen, precision, b, steps);
  return 'error' in timed ? { batchSize: 0, seqPerS: null, guess: null, error: timed.error } : { batchSize: b, seqPerS: b / timed.seconds, guess: null, error: null };
}

/** The provider to measure (`--provider`, default cuda) if it loads, or why not. */
async function chooseProvider(): Promise<{ provider: GpuProvider } | { reason: string }> {
  const provider = flag('--provider') ?? 'cuda';
  if (provider !== 'cuda' && provider !== 'webgpu') throw new Error(`--provider: ${provider} is not cuda or webgpu`);
  const probe = await probeProvider(provider);
  if (probe.ok) return { provider };
  return { reason: provider === 'cuda' ? (missingCudaProvider() ?? probe.error ?? 'the CUDA provider does not load') : `WebGPU: ${probe.error}` };
}

/** Figures of the PyTorch peer (bench/gpu_torch.py) on the same GPU, keyed like ours with a `torch_` prefix, or why there are none. */
function torchPeer(maxBatch: number, steps: number): { figures: Record<string, number | null>; version: string } | { skipped: string } {
  const python = findTorchPython();
  if (!python) return { skipped: 'no Python with torch (set COHORT_TORCH_PYTHON)' };
  const spec = { config, seqLens: SEQ_LENS, precisions: PRECISIONS, maxBatch, steps };
  const script = fileURLToPath(new URL('./gpu_torch.py', import.meta.url));
  const run = spawnSync(python, [script, JSON.stringify(spec)], { encoding: 'utf8', env: torchEnv(), timeout: 30 * 60_000 });
  const lines = (run.stdout ?? '').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const error = lines.find((l) => typeof l.error === 'string')?.error as string | undefined;
  if (run.status !== 0 || error || lines.length === 0) return { skipped: error ?? `${python} ${script} exited ${run.status}: ${(run.stderr ?? '').trim().split('\n').at(-1) ?? ''}` };
  const figures: Record<string, number | null> = {};
  for (const l of lines.filter((l) => typeof l.seq === 'number')) {
    figures[`torch_seq${String(l.seq)}_${String(l.precision)}_batch`] = l.batch as number;
    figures[`torch_seq${String(l.seq)}_${String(l.precision)}_seq_per_s`] = l.seq_per_s as number | null;
  }
  const version = lines.at(-1)?.torch;
  return { figures, version: typeof version === 'string' ? version : '?' };
}

async function main(): Promise<void> {
  const steps = arg('--steps', 5);
  const maxBatch = arg('--max-batch', 256);
  const gpu = queryGpus()?.[0];
  const name = gpu?.name ?? null;
  const figures: Record<string, number | string | null> = { gpu: name, steps };
  const fixed = flag('--batch') === undefined ? undefined : arg('--batch', 1);
  const seqLens = flag('--seq-len') === undefined ? SEQ_LENS : SEQ_LENS.filter((s) => s === arg('--seq-len', 128));
  if (seqLens.length === 0) throw new Error(`--seq-len: ${flag('--seq-len')} is not one of ${SEQ_LENS.join(', ')}`);
  const chosen = await chooseProvider();
  if ('provider' in chosen) {
    figures.provider = chosen.provider;
    console.log(`gpu bench: ALBERT-large on ${name ?? 'unknown GPU (nvidia-smi unavailable)'}${gpu ? ` (${formatBytes(gpu.freeBytes)} free)` : ''} through onnxruntime's ${chosen.provider} provider, ${fixed ? `micro-batch ${fixed}` : `largest micro-batch that runs (up to ${maxBatch})`}, median of ${steps} steps after a warm-up`);
    for (const seqLen of seqLens) {
      // the WebGPU provider trains in fp32 only (providerPrecisionProblem)
      for (const precision of PRECISIONS.filter((p) => providerPrecisionProblem(chosen.provider, p) === undefined)) {
        const r = fixed ? await fixedBatch(chosen.provider, seqLen, precision, fixed, steps) : await largestFitting(chosen.provider, seqLen, precision, gpu, maxBatch, steps);
        const key = `seq${seqLen}_${precision}`;
        console.log(`seq ${seqLen} ${precision}: ${r.seqPerS === null ? `no micro-batch ran (${r.error})` : `micro-batch ${r.batchSize} (estimate said ${r.guess ?? '–'}), ${r.seqPerS.toFixed(1)} seq/s`}`);
        figures[`${key}_batch`] = r.batchSize;
        figures[`${key}_seq_per_s`] = r.seqPerS === null ? null : Number(r.seqPerS.toFixed(2));
        figures[`${key}_estimated_batch`] = r.guess;
      }
    }
  } else {
    figures.reason = chosen.reason;
    console.log(`gpu bench: the provider does not load here, Cohort's step is not measured (${chosen.reason}).`);
    console.log('CUDA needs an NVIDIA GPU, its driver, CUDA 12 + cuDNN 9 and onnxruntime-node\'s CUDA provider; WebGPU a GPU driver with Vulkan (Linux; D3D12 or Metal elsewhere).');
  }
  // the PyTorch peer needs only a GPU: with no CUDA provider it still gives this machine's reference
  const torch = name === null ? { skipped: 'no GPU (nvidia-smi sees none)' } : torchPeer(maxBatch, steps);
  if ('skipped' in torch) console.log(`PyTorch peer: not run (${torch.skipped})`);
  else {
    Object.assign(figures, torch.figures);
    console.log(`PyTorch ${torch.version} peer on the same GPU (bench/gpu_torch.py, eager, autocast fp16): ${SEQ_LENS.flatMap((s) => PRECISIONS.map((p) => `seq ${s} ${p} ${torch.figures[`torch_seq${s}_${p}_seq_per_s`] ?? '–'} seq/s at ${torch.figures[`torch_seq${s}_${p}_batch`]}`)).join('; ')}`);
  }
  const ours = (figures.seq128_fp16_seq_per_s ?? null) as number | null;
  const torchFp16 = (figures.torch_seq128_fp16_seq_per_s ?? null) as number | null;
  figures.gpu_vs_torch = ours !== null && torchFp16 ? Number((ours / torchFp16).toFixed(3)) : null;
  const ref = name === null ? undefined : BERT_LARGE_REFERENCE.find((r) => r.pattern.test(name));
  figures.bert_ref_seq_per_s = ref?.seqPerS ?? null;
  figures.gpu_vs_bert_ref = ref && ours !== null ? Number((ours / ref.seqPerS).toFixed(3)) : null;
  console.log(ref ? `BERT-large reference (DeepLearningExamples, PyTorch, 1×${ref.gpu}, seq 128, mixed precision): ${ref.seqPerS} seq/s; ours fp16 seq 128: ${ours ?? '–'} seq/s → ${figures.gpu_vs_bert_ref ?? '–'}` : `no published BERT-large reference for ${name ?? 'this machine'} (known: ${BERT_LARGE_REFERENCE.map((r) => `${r.gpu} ${r.seqPerS} seq/s`).join(', ')})`);
  console.log(`ours ÷ PyTorch, fp16 seq 128: ${figures.gpu_vs_torch ?? '–'}`);
  reportJson(figures);
}

await main();
