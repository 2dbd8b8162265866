import type { Graph, Value } from './onnx/graph.js';

/** √(2/π) and the cubic coefficient of the tanh approximation of GELU. */
const C = Math.sqrt(2 / Math.PI);
const A = 0.044715;

/**
 * gelu_new (HF's tanh approximation): y = ½·x·(1 + tanh(C·(x + A·x³))), computed in the equal
 * sigmoid form y = x·s, s = σ(x·(2C + 2CA·x²)), since ½(1 + tanh u) = σ(2u): 6 elementwise passes
 * over [N, intermediate] instead of 9, and 8 for the VJP instead of 14 (these passes, not the
 * Gemms, are where this op's time goes on CPU).
 * Fused: its VJP keeps only x, s and y alive, not the primitives' intermediates (the largest
 * activations of the model).
 *   dy/dx = s + y·(1 − s)·(2C + 6CA·x²)
 */
export function geluNew(g: Graph, x: Value): Value {
  const s = g.sigmoid(g.mul(x, g.add(g.mul(g.mul(x, x), g.scalar(2 * C * A)), g.scalar(2 * C))));
  const y = g.mul(x, s);
  return g.fused([x], y, (g, d) => {
    const slope = g.add(g.mul(g.mul(x, x), g.scalar(6 * C * A)), g.scalar(2 * C));
    const dydx = g.add(s, g.mul(g.mul(y, g.sub(g.scalar(1), s)), slope));
    return [g.mul(d, dydx)];
  });
}
