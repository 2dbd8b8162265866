import fs from 'node:fs';
import { z } from 'zod';

/** The ops whose kernels are matrix products (FusedMatMul: ORT's MatMul with a folded transpose or scale). */
const MATMUL_OPS = new Set(['Gemm', 'MatMul', 'FusedMatMul', 'FusedGemm']);

const Event = z.object({ cat: z.string().optional(), name: z.string(), ts: z.number(), dur: z.number(), args: z.object({ op_name: z.string().optional() }).passthrough().optional() });

export interface RunProfile {
  /** Wall time of the profiled run, ms. */
  readonly runMs: number;
  /** Sum of its node kernels' times, ms. */
  readonly kernelMs: number;
  /** Of which matrix products (Gemm, MatMul and ORT's fused forms), ms. */
  readonly matmulMs: number;
}

/** The last run of an onnxruntime profile file (enableProfiling): where its kernel time went. */
export function lastRunProfile(file: string): RunProfile {
  const events = z.array(Event).parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  const run = events.filter((e) => e.name === 'model_run').at(-1);
  if (!run) throw new Error(`${file}: no model_run event (was a run profiled?)`);
  let kernelMs = 0;
  let matmulMs = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < run.ts || e.ts > run.ts + run.dur) continue;
    kernelMs += e.dur / 1000;
    if (MATMUL_OPS.has(e.args?.op_name ?? '')) matmulMs += e.dur / 1000;
  }
  return { runMs: run.dur / 1000, kernelMs, matmulMs };
}
