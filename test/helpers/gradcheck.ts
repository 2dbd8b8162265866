import * as ort from 'onnxruntime-node';
import { gradients } from '../../src/engine/autodiff.js';
import { Graph, floatTensor, sizeOf, type Value } from '../../src/engine/onnx/graph.js';
import { encodeModel } from '../../src/engine/onnx/encode.js';
import { Rng } from '../../src/engine/rng.js';

export interface GradCheckResult {
  /** Largest |analytic − numeric| / (atol + rtol·|numeric|) over the checked elements; ≤ 1 passes. */
  readonly worst: number;
  readonly where: string;
  readonly checked: number;
}

/**
 * Central-difference check of autodiff in float64: `build` adds inputs (returned with their values)
 * and an output y; the loss is Σ y ⊙ w for a fixed random w, so every element of y matters.
 * Checks up to `maxPerInput` elements of each input.
 */
export async function gradCheck(
  build: (g: Graph, rng: Rng) => { inputs: { value: Value; data: Float64Array }[]; y: Value },
  { rtol = 1e-6, atol = 1e-8, h = 1e-6, maxPerInput = 24, seed = 1 } = {},
): Promise<GradCheckResult> {
  const rng = new Rng(seed);
  const g = new Graph('float64');
  const { inputs, y } = build(g, rng);
  const w = new Float64Array(sizeOf(y.shape));
  rng.normal(w);
  const loss = g.reduceSum(g.mul(y, g.constant(floatTensor('float64', y.shape, w))), [], false);
  const grads = gradients(g, loss, inputs.map((i) => i.value));
  g.output(loss, 'loss');
  for (const i of inputs) g.output(grads.get(i.value.name)!, `grad_${i.value.name}`);
  const session = await ort.InferenceSession.create(encodeModel(g));
  const feeds = () => Object.fromEntries(inputs.map((i) => [i.value.name, new ort.Tensor('float64', i.data, [...i.value.shape])]));
  const analytic = await session.run(feeds());
  const lossAt = async () => ((await session.run(feeds(), ['loss'])).loss!.data as Float64Array)[0]!;
  let worst = 0;
  let where = '';
  let checked = 0;
  for (const input of inputs) {
    const grad = analytic[`grad_${input.value.name}`]!.data as Float64Array;
    const n = input.data.length;
    const picks = n <= maxPerInput ? [...Array(n).keys()] : Array.from({ length: maxPerInput }, () => rng.int(n));
    for (const k of picks) {
      const x0 = input.data[k]!;
      input.data[k] = x0 + h;
      const up = await lossAt();
      input.data[k] = x0 - h;
      const down = await lossAt();
      input.data[k] = x0;
      const numeric = (up - down) / (2 * h);
      const err = Math.abs(grad[k]! - numeric) / (atol + rtol * Math.abs(numeric));
      checked++;
      if (err > worst) {
        worst = err;
        where = `${input.value.name}[${k}]: analytic ${grad[k]} numeric ${numeric}`;
      }
    }
  }
  await session.release();
  return { worst, where, checked };
}

/** A float64 input of the given shape filled with normal(0, 1) samples. */
export function randomInput(g: Graph, rng: Rng, name: string, shape: readonly number[]): { value: Value; data: Float64Array } {
  const data = new Float64Array(sizeOf(shape));
  rng.normal(data);
  return { value: g.input(name, shape), data };
}
