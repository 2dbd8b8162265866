import type { StepResult } from './backend.js';

/** Float16's unit roundoff (2⁻¹¹). */
const HALF_ROUNDOFF = 2 ** -11;

export interface Tolerance {
  /** |loss − reference| ≤ loss × |reference| (each of loss, MLM loss, SOP loss). */
  readonly loss: number;
  /** ‖g − reference‖ ≤ gradient × ‖reference‖ per parameter tensor (see compareRuns for the floor). */
  readonly gradient: number;
}

/**
 * A float16 computation against a float32 one (and CUDA, whose float32 matmuls may run in TF32 with the
 * same 10-bit mantissa, against the CPU): each float16 Gemm rounds its operands and result (a few u per
 * element) and the error passes through every layer application forward and backward, so ≈ 10u ≈ 5e-3
 * relative is the expected scale; 1e-2 per gradient tensor and 2e-3 on the losses (softmax,
 * log-softmax and the losses run in float32). Measured on CPU, fp16 vs fp32: ≤ 5e-4 from HF init.
 */
export const HALF_PRECISION_TOLERANCE: Tolerance = { loss: 2e-3, gradient: 1e-2 };

export interface RunComparison {
  readonly lossRelative: number;
  /** The parameter tensor with the largest relative gradient difference. */
  readonly worst: { readonly name: string; readonly relative: number };
  /** One line per loss or tensor outside the tolerance (empty: the runs agree). */
  readonly failures: readonly string[];
}

const norm = (xs: Float32Array) => Math.sqrt(xs.reduce((a, x) => a + x * x, 0));
const diffNorm = (a: Float32Array, b: Float32Array) => Math.sqrt(a.reduce((s, x, i) => s + (x - b[i]!) ** 2, 0));

/**
 * How far `run` is from `reference` (same parameters, same batch): the losses relative to the
 * reference's, every gradient tensor by ‖g − g_ref‖ / ‖g_ref‖. A tensor whose exact gradient is zero
 * (an attention key bias: softmax ignores a shift shared by a row's scores) holds only cancellation
 * residue in both runs, so the bound is max(tolerance × ‖g_ref‖, u × ‖all gradients‖), u = 2⁻¹¹.
 */
export function compareRuns(reference: StepResult, run: StepResult, tolerance: Tolerance): RunComparison {
  const failures: string[] = [];
  const relative = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);
  const losses = [['loss', run.loss, reference.loss], ['mlm_loss', run.mlmLoss, reference.mlmLoss], ['sop_loss', run.sopLoss, reference.sopLoss]] as const;
  for (const [name, a, b] of losses) if (!(relative(a, b) <= tolerance.loss)) failures.push(`${name} ${a} vs ${b} (relative ${relative(a, b).toExponential(2)} > ${tolerance.loss})`);
  const floor = HALF_ROUNDOFF * norm(reference.grads.data);
  let worst = { name: '', relative: -1 };
  for (const spec of reference.grads.specs) {
    const [a, b] = [run.grads.view(spec.name), reference.grads.view(spec.name)];
    const diff = diffNorm(a, b);
    const rel = diff / Math.max(norm(b), Number.MIN_VALUE);
    if (!(diff <= Math.max(tolerance.gradient * norm(b), floor))) failures.push(`${spec.name}: ‖Δg‖/‖g‖ = ${rel.toExponential(2)} > ${tolerance.gradient}`);
    if (norm(b) > floor && rel > worst.relative) worst = { name: spec.name, relative: rel };
  }
  return { lossRelative: relative(run.loss, reference.loss), worst, failures };
}
