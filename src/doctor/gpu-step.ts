import { PRESETS } from '../engine/albert/config.js';
import { initAlbertParams } from '../engine/albert/params.js';
import { compareRuns, HALF_PRECISION_TOLERANCE } from '../engine/compare-runs.js';
import { missingCudaProvider } from '../engine/cuda-install.js';
import { OrtBackend } from '../engine/ort-backend.js';
import { Rng } from '../engine/rng.js';
import { syntheticBatch } from '../engine/synthetic.js';
import type { CheckResult } from './checks.js';
import { probeProvider } from './ort-probe.js';

const NAME = 'CUDA training step';
/** A tiny ALBERT step: enough to run every op of the graph, small enough for any GPU and a second on the CPU. */
const [BATCH, SEQ] = [2, 32];

/**
 * `cohort doctor --gpu`: one forward + backward of the tiny preset on CUDA and on the CPU, same
 * parameters and batch, fp32 and fp16 (CUDA fp16 against CPU fp32: what mixed precision must
 * preserve), losses and every gradient compared within HALF_PRECISION_TOLERANCE (cuBLAS may run
 * float32 matmuls in TF32, whose mantissa is float16's). The CUDA sessions refuse CPU fallback, so a
 * node without a CUDA kernel fails this check by name. Without a CUDA provider: 'missing', saying why.
 */
export async function checkGpuTrainingStep(): Promise<CheckResult> {
  const cuda = await probeProvider('cuda');
  if (!cuda.ok) {
    const notInstalled = missingCudaProvider();
    return {
      name: NAME,
      status: 'missing',
      detail: `not run: no CUDA provider here (${notInstalled ?? cuda.error})`,
      fix: 'needs an NVIDIA GPU with its driver, CUDA 12 + cuDNN 9 libraries and onnxruntime-node\'s CUDA provider (see the CUDA provider line); Cohort trains on the CPU meanwhile',
    };
  }
  const config = PRESETS.tiny;
  const params = initAlbertParams(config, 1);
  const batch = syntheticBatch(config, BATCH, SEQ, new Rng(1));
  const run = async (provider: 'cpu' | 'cuda', precision: 'fp32' | 'fp16') => {
    const backend = new OrtBackend(config, { provider, precision });
    try {
      return await backend.forwardBackward(params, batch, undefined, precision === 'fp16' ? { lossScale: 2 ** 10 } : {});
    } finally {
      await backend.close();
    }
  };
  try {
    const reference = await run('cpu', 'fp32');
    const lines: string[] = [];
    const failures: string[] = [];
    for (const precision of ['fp32', 'fp16'] as const) {
      const c = compareRuns(reference, await run('cuda', precision), HALF_PRECISION_TOLERANCE);
      lines.push(`${precision}: loss within ${c.lossRelative.toExponential(1)}, worst gradient ${c.worst.name} ${c.worst.relative.toExponential(1)}`);
      failures.push(...c.failures.map((f) => `${precision}: ${f}`));
    }
    const tolerance = `tolerance: loss ${HALF_PRECISION_TOLERANCE.loss}, each gradient tensor ${HALF_PRECISION_TOLERANCE.gradient} relative`;
    if (failures.length > 0) {
      return { name: NAME, status: 'fail', detail: `CUDA differs from the CPU (${tolerance}): ${failures.slice(0, 3).join('; ')}${failures.length > 3 ? ` and ${failures.length - 3} more` : ''}`, fix: 'report it with this output: the GPU would train on wrong gradients' };
    }
    return { name: NAME, status: 'ok', detail: `tiny ALBERT ${BATCH}×${SEQ} forward + backward on CUDA matches the CPU (${tolerance}); ${lines.join('; ')}` };
  } catch (err) {
    return { name: NAME, status: 'fail', detail: `the CUDA step failed: ${(err as Error).message.split('\n')[0]}`, fix: 'report it with this output; Cohort falls back to the CPU for training' };
  }
}
