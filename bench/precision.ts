/**
 * fp16 vs fp32 training step: one ALBERT forward + backward (every gradient) per precision, in the
 * same process on the same provider, steps interleaved so both see the same load → fp16_vs_fp32 =
 * fp16 ÷ fp32 step time per preset. fp16 steps run at a DynamicLossScaler's scale, as training does.
 * On CPU onnxruntime has no float16 Gemm/MatMul kernels and wraps them in casts, so the ratio there
 * only measures that overhead; the figure that matters is CUDA's (`--provider cuda`).
 * Usage: npm run bench -- precision [--presets tiny,base] [--steps N] [--batch-size B] [--seq-len S] [--provider auto|cpu|cuda] [--threads T]
 */
import { PRESETS } from '../src/engine/albert/config.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import { DynamicLossScaler } from '../src/engine/loss-scaler.js';
import { OrtBackend } from '../src/engine/ort-backend.js';
import type { ProviderChoice } from '../src/engine/providers.js';
import { Rng } from '../src/engine/rng.js';
import { syntheticBatch } from '../src/engine/synthetic.js';
import { scaledGradients } from '../src/engine/trainer.js';
import { arg, presetsArg } from './_args.js';
import { median, reportJson } from './_report.js';


async function main(): Promise<void> {
  const presets = presetsArg('--presets', 'tiny,base');
  const steps = Number(arg('--steps', '3'));
  const [B, S] = [Number(arg('--batch-size', '8')), Number(arg('--seq-len', '128'))];
  const provider = arg('--provider', 'auto') as ProviderChoice;
  if (!['auto', 'cpu', 'cuda'].includes(provider)) throw new Error(`--provider: ${provider}; accepted: auto, cpu, cuda`);
  const threads = process.argv.includes('--threads') ? Number(arg('--threads', '1')) : undefined;
  console.log(`precision bench: B=${B} S=${S}, 1 warm-up + ${steps} timed steps per precision, interleaved; provider ${provider}`);
  const figures: Record<string, number | string | null> = { batch_size: B, seq_len: S, steps };
  for (const preset of presets) {
    const config = PRESETS[preset];
    const params = initAlbertParams(config, 0);
    const grads = params.zerosLike();
    const batch = syntheticBatch(config, B, S, new Rng(1));
    const fp32 = new OrtBackend(config, { provider, intraOpThreads: threads });
    const fp16 = new OrtBackend(config, { provider, intraOpThreads: threads, precision: 'fp16' });
    const scaler = new DynamicLossScaler();
    const ms = { fp32: [] as number[], fp16: [] as number[] };
    const losses = { fp32: 0, fp16: 0 };
    try {
      for (let i = 0; i <= steps; i++) {
        for (const [name, backend] of [['fp32', fp32], ['fp16', fp16]] as const) {
          const start = performance.now();
          const r = await scaledGradients(backend, params, batch, grads, name === 'fp16' ? scaler : undefined);
          if (i > 0) ms[name].push(performance.now() - start);
          losses[name] = r.loss;
        }
      }
    } finally {
      await fp32.close();
      await fp16.close();
    }
    const [m32, m16] = [median(ms.fp32), median(ms.fp16)];
    console.log(`${preset.padEnd(5)} fp32 ${m32.toFixed(0)} ms/step (${fp32.description})  fp16 ${m16.toFixed(0)} ms/step (${fp16.description}, loss scale ${scaler.scale}, ${scaler.skippedSteps} overflows)  fp16/fp32 ${(m16 / m32).toFixed(2)}  loss ${losses.fp32.toFixed(4)} vs ${losses.fp16.toFixed(4)}`);
    figures.provider = fp16.description;
    figures[`${preset}_fp32_step_ms`] = Math.round(m32);
    figures[`${preset}_fp16_step_ms`] = Math.round(m16);
    figures[`${preset}_fp16_vs_fp32`] = Number((m16 / m32).toFixed(3));
    figures[`${preset}_fp16_overflows`] = scaler.skippedSteps;
  }
  reportJson(figures);
}

await main();
