/**
 * Times optimizer steps on the ALBERT-large parameter layout (the engine's own HF AlbertForPreTraining
 * tensors: hidden 1024, intermediate 4096, embedding 128, one shared layer, tied MLM decoder). Shared by `npm run bench -- optim` and the engine benchmark (`lamb_ms_large`).
 */
import { performance } from 'node:perf_hooks';
import { createOptimizer, type OptimizerKind } from '../src/engine/optim/index.js';
import { PRESETS } from '../src/engine/albert/config.js';
import { albertParamSpecs } from '../src/engine/albert/params.js';
import { ParameterSet, type ParamSpec } from '../src/engine/params.js';
import { median } from './_report.js';

export const ALBERT_LARGE_VOCAB: number = PRESETS.large.vocabSize;
const EMBEDDING = PRESETS.large.embeddingSize;

/** AlbertForPreTraining's trainable tensors for ALBERT-large with `vocabSize` tokens (30000: 17.7M parameters). */
export function albertLargeLayout(vocabSize = ALBERT_LARGE_VOCAB): ParamSpec[] {
  return albertParamSpecs({ ...PRESETS.large, vocabSize });
}

function countOf(layout: readonly ParamSpec[]): number {
  return layout.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Parameters in the layout that do not scale with the vocabulary, and those per vocabulary entry. */
const FIXED = countOf(albertLargeLayout(1)) - (EMBEDDING + 1);
const PER_TOKEN = EMBEDDING + 1;

/** Steps before timing: pages the moments in and lets V8 tier the kernels up from its baseline compiler. */
const WARMUP_STEPS = 5;

export interface StepTiming {
  /** Median over the timed steps, in milliseconds. */
  readonly msPerStep: number;
  readonly paramCount: number;
}

/**
 * A ready-to-time optimizer step over `paramCount` parameters, already warmed up. Without `layout`,
 * the ALBERT-large layout is used with the vocabulary sized so the total is as close to
 * `paramCount` as the shapes allow (vocab 30000 ↔ 17.8M); with one, `paramCount` must be its size.
 */
export function prepareOptimizerStep(kind: OptimizerKind, paramCount: number, layout?: readonly ParamSpec[]): { step: () => void; paramCount: number } {
  const specs = layout ?? albertLargeLayout(Math.round((paramCount - FIXED) / PER_TOKEN));
  if (layout && countOf(layout) !== paramCount) throw new RangeError(`layout has ${countOf(layout)} parameters, not the ${paramCount} asked for`);
  if (!layout && paramCount < FIXED + 2 * PER_TOKEN) throw new RangeError(`paramCount ${paramCount} is below the ALBERT-large layout's minimum of ${FIXED + 2 * PER_TOKEN}`);
  const params = ParameterSet.allocate(specs);
  const grads = params.zerosLike();
  fillNormal(params.data, 0.02, 1);
  fillNormal(grads.data, 1e-3, 2);
  const optimizer = createOptimizer(params, { kind });
  const step = (): void => optimizer.step(params, grads, 1e-3);
  // the baseline compiler runs the kernels at about half speed: time only after tier-up
  for (let s = 0; s < WARMUP_STEPS; s++) step();
  return { step, paramCount: params.size };
}

/** Milliseconds `run` takes. */
export function timeOnce(run: () => void): number {
  const start = performance.now();
  run();
  return performance.now() - start;
}

/** Median time of one optimizer step (see `prepareOptimizerStep`). */
export function timeOptimizerStep(kind: OptimizerKind, paramCount: number, layout?: readonly ParamSpec[], steps = 7): StepTiming {
  const { step, paramCount: size } = prepareOptimizerStep(kind, paramCount, layout);
  return { msPerStep: median(Array.from({ length: steps }, () => timeOnce(step))), paramCount: size };
}

/** Median time of one LAMB step (see `timeOptimizerStep`). */
export function timeLambStep(paramCount: number, layout?: readonly ParamSpec[]): StepTiming {
  return timeOptimizerStep('lamb', paramCount, layout);
}

/** Deterministic roughly normal values (sum of uniforms from a small LCG): cheap and reproducible. */
export function fillNormal(x: Float32Array, std: number, seed: number): void {
  let state = seed >>> 0;
  const next = (): number => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
  for (let i = 0; i < x.length; i++) x[i] = (next() + next() + next() - 1.5) * 2 * std;
}

export const ALBERT_LARGE_PARAMS = countOf(albertLargeLayout());
