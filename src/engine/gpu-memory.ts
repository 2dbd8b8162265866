import { spawnSync } from 'node:child_process';
import type { AlbertConfig } from './albert/config.js';
import type { Precision } from './albert/graph.js';
import { estimateGpuMemory, formatBytes } from './memory-estimate.js';

/** One GPU as nvidia-smi reports it. */
export interface GpuInfo {
  readonly name: string;
  readonly freeBytes: number;
}

/** The query: free memory first (MiB), then the name (which may hold commas, so it comes last). */
const NVIDIA_SMI_ARGS = ['--query-gpu=memory.free,name', '--format=csv'];

/**
 * Parses `nvidia-smi --query-gpu=memory.free,name --format=csv`: a header line
 * ("memory.free [MiB], name"), then one line per GPU ("15102 MiB, Tesla T4"). Anything else is an
 * error naming the line (a driver that answers "[N/A]" for a GPU it cannot read included).
 */
export function parseNvidiaSmi(csv: string): GpuInfo[] {
  const lines = csv.split('\n').map((l) => l.trim()).filter(Boolean);
  if (lines[0] !== 'memory.free [MiB], name') throw new Error(`nvidia-smi: unexpected header "${lines[0] ?? ''}" (expected "memory.free [MiB], name")`);
  return lines.slice(1).map((line) => {
    const m = /^(\d+) MiB, (.+)$/.exec(line);
    if (!m) throw new Error(`nvidia-smi: unreadable line "${line}" (expected "<free> MiB, <name>")`);
    return { name: m[2]!, freeBytes: Number(m[1]) * 2 ** 20 };
  });
}

/**
 * The machine's NVIDIA GPUs from nvidia-smi, or null where there is none to ask: nvidia-smi is not
 * installed, fails (no driver loaded, no device) or times out. Output it does give but that does not
 * parse is an error, not null: that is a driver Cohort has not met, worth reporting.
 */
export function queryGpus(command = 'nvidia-smi', timeoutMs = 5000): GpuInfo[] | null {
  const r = spawnSync(command, NVIDIA_SMI_ARGS, { encoding: 'utf8', timeout: timeoutMs });
  if (r.error || r.status !== 0) return null;
  return parseNvidiaSmi(r.stdout);
}

/**
 * Room left on the GPU for the arena to grow past the estimate: onnxruntime's CUDA arena extends in
 * chunks, and other processes may allocate meanwhile.
 */
const GPU_HEADROOM = 0.9;

export type GpuMicroBatchPlan =
  | { readonly fits: true; readonly batchSize: number; readonly estimateBytes: number }
  | { readonly fits: false; readonly estimateBytes: number; readonly reason: string };

/**
 * The largest micro-batch ≤ `maxBatchSize` whose estimated GPU memory (estimateGpuMemory) fits in 90 %
 * of the GPU's free memory. For ALBERT-large at 512 tokens on a 16 GB card (T4, P100, 15–16 GiB free)
 * it gives 9, on a 12 GB K80 6, where the seeds' notebook (HF PyTorch, fp16) picked 4 on a T4 or P100
 * by name and 1 on any other GPU; the estimate is calibrated on the CPU, and `npm run bench -- gpu`
 * measures the real largest fit.
 */
export function planGpuMicroBatch(config: AlbertConfig, shape: { readonly seqLen: number; readonly precision: Precision; readonly maxBatchSize: number }, gpu: GpuInfo): GpuMicroBatchPlan {
  const budget = GPU_HEADROOM * gpu.freeBytes;
  for (let b = shape.maxBatchSize; b >= 1; b--) {
    const estimateBytes = estimateGpuMemory(config, { batchSize: b, seqLen: shape.seqLen, precision: shape.precision });
    if (estimateBytes <= budget) return { fits: true, batchSize: b, estimateBytes };
  }
  const estimateBytes = estimateGpuMemory(config, { batchSize: 1, seqLen: shape.seqLen, precision: shape.precision });
  return { fits: false, estimateBytes, reason: `one sequence of ${shape.seqLen} tokens needs about ${formatBytes(estimateBytes)} of GPU memory; ${gpu.name} has ${formatBytes(gpu.freeBytes)} free` };
}
