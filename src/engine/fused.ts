import type { Graph, Value } from './onnx/graph.js';

/** √(2/π) and the cubic coefficient of the tanh approximation of GELU. */
const C = Math.sqrt(2 / Math.PI);
const A = 0.044715;

/**
 * gelu_new (HF's tanh approximation): y = ½·x·(1 + t), t = tanh(C·(x + A·x³)).
 * Fused: its VJP keeps only x and t alive, not the six primitives' intermediates (the largest
 * activations of the model, [N, intermediate]).
 *   dy/dx = ½·(1 + t) + ½·x·(1 − t²)·C·(1 + 3A·x²)
 */
export function geluNew(g: Graph, x: Value): Value {
  const t = g.tanh(g.mul(g.scalar(C), g.add(x, g.mul(g.scalar(A), g.mul(g.mul(x, x), x)))));
  const y = g.mul(g.mul(g.scalar(0.5), x), g.add(g.scalar(1), t));
  return g.fused([x], y, (g, d) => {
    const half = g.scalar(0.5);
    const slope = g.mul(g.scalar(C), g.add(g.scalar(1), g.mul(g.scalar(3 * A), g.mul(x, x))));
    const dydx = g.add(g.mul(half, g.add(g.scalar(1), t)), g.mul(g.mul(half, x), g.mul(g.sub(g.scalar(1), g.mul(t, t)), slope)));
    return [g.mul(d, dydx)];
  });
}
