import type { FloatType, Graph, Node, Value } from './onnx/graph.js';

/**
 * Vector-Jacobian products, one per ONNX op on a differentiable path, keyed by op type.
 * `d` holds the gradient of each output (undefined where none flows); a rule returns one gradient
 * per input (undefined for non-differentiable inputs such as indices or shapes). A gradient may keep
 * the output's broadcast shape: autodiff's `unbroadcast` reduces it to the input's shape.
 */
export type Rule = (g: Graph, node: Node, d: readonly (Value | undefined)[]) => readonly (Value | undefined)[];

const intAttr = (node: Node, name: string, fallback: number): number => {
  const a = node.attrs[name];
  return a && 'i' in a ? a.i : fallback;
};

/** Swaps the last two axes (the transpose inside a batched matrix product). */
const swapLast = (g: Graph, x: Value): Value => {
  const r = x.shape.length;
  return g.transpose(x, [...Array(r - 2).keys(), r - 1, r - 2]);
};

export const RULES: Readonly<Record<string, Rule>> = {
  Identity: (_g, _n, [d]) => [d],
  Add: (_g, _n, [d]) => [d, d],
  Sub: (g, _n, [d]) => [d, g.neg(d!)],
  Neg: (g, _n, [d]) => [g.neg(d!)],
  Mul: (g, { inputs: [a, b] }, [d]) => [g.mul(d!, b!), g.mul(d!, a!)],
  // y = a / b: dy/da = 1/b, dy/db = -y/b
  Div: (g, { inputs: [, b], outputs: [y] }, [d]) => [g.div(d!, b!), g.neg(g.div(g.mul(d!, y!), b!))],
  Exp: (g, { outputs: [y] }, [d]) => [g.mul(d!, y!)],
  // tanh' = 1 - y²
  Tanh: (g, { outputs: [y] }, [d]) => [g.sub(d!, g.mul(d!, g.mul(y!, y!)))],
  // softmax: dx = y ⊙ (d − Σ d⊙y)
  Softmax: (g, node, [d]) => {
    if (intAttr(node, 'axis', -1) !== -1) throw new Error('autodiff: Softmax rule supports axis -1 only');
    const y = node.outputs[0]!;
    return [g.mul(y, g.sub(d!, g.reduceSum(g.mul(d!, y), [-1])))];
  },
  // log-softmax: dx = d − exp(y) ⊙ Σ d
  LogSoftmax: (g, node, [d]) => {
    if (intAttr(node, 'axis', -1) !== -1) throw new Error('autodiff: LogSoftmax rule supports axis -1 only');
    return [g.sub(d!, g.mul(g.exp(node.outputs[0]!), g.reduceSum(d!, [-1])))];
  },
  // y = a·b: da = d·bᵀ, db = aᵀ·d (batch dimensions un-broadcast by autodiff)
  MatMul: (g, { inputs: [a, b] }, [d]) => [g.matmul(d!, swapLast(g, b!)), g.matmul(swapLast(g, a!), d!)],
  // y = a·b' + c with b' = bᵀ when transB (transA unsupported: the model never uses it)
  Gemm: (g, node, [d]) => {
    const [a, b, c] = node.inputs;
    if (intAttr(node, 'transA', 0) !== 0 || node.attrs.alpha || node.attrs.beta) throw new Error('autodiff: Gemm rule supports transA=0, alpha=beta=1 only');
    const transB = intAttr(node, 'transB', 0) === 1;
    const da = transB ? g.gemm(d!, b!, undefined) : g.gemm(d!, b!, undefined, false, true);
    const db = transB ? g.gemm(d!, a!, undefined, true) : g.gemm(a!, d!, undefined, true);
    return c ? [da, db, d] : [da, db];
  },
  // embedding lookup: rows of d are summed into the gathered rows (repeated ids accumulate)
  Gather: (g, node, [d]) => {
    const [data, indices] = node.inputs as [Value, Value];
    if (intAttr(node, 'axis', 0) !== 0) throw new Error('autodiff: Gather rule supports axis 0 only');
    const n = indices.shape.reduce((x, y) => x * y, 1);
    const rows = g.reshape(indices.dtype === 'int64' ? indices : g.cast(indices, 'int64'), [n, 1]);
    return [g.scatterAdd(g.zeros(data.shape, data.dtype), rows, g.reshape(d!, [n, ...data.shape.slice(1)]))];
  },
  // over the last axis: dx = σ⁻¹ (dx̂ − mean(dx̂) − x̂ ⊙ mean(dx̂ ⊙ x̂)), dx̂ = d ⊙ γ; dγ = d ⊙ x̂; dβ = d
  LayerNormalization: (g, node, [d]) => {
    const [x, gamma] = node.inputs as [Value, Value];
    const [, mean, invStd] = node.outputs as [Value, Value, Value];
    if (intAttr(node, 'axis', -1) !== -1) throw new Error('autodiff: LayerNormalization rule supports axis -1 only');
    // the saved statistics are float32 whatever x is (opset 17); bring them to x's type
    const [mu, rstd] = x.dtype === mean.dtype ? [mean, invStd] : [g.cast(mean, x.dtype), g.cast(invStd, x.dtype)];
    const xhat = g.mul(g.sub(x, mu), rstd);
    const dxhat = g.mul(d!, gamma);
    const dx = g.mul(rstd, g.sub(g.sub(dxhat, g.reduceMean(dxhat, [-1])), g.mul(xhat, g.reduceMean(g.mul(dxhat, xhat), [-1]))));
    return [dx, g.mul(d!, xhat), d];
  },
  Reshape: (g, { inputs: [x] }, [d]) => [g.reshape(d!, x!.shape), undefined],
  Transpose: (g, node, [d]) => {
    const perm = node.attrs.perm as { ints: readonly number[] };
    const inverse = perm.ints.map((_, i) => perm.ints.indexOf(i));
    return [g.transpose(d!, inverse)];
  },
  // the gradient of a slice is zero-padded back to the input's extent
  Slice: (g, node, [d]) => {
    const [x, starts, ends, axes] = node.inputs as [Value, Value, Value, Value];
    const [s, e, ax] = [g.constInts(starts), g.constInts(ends), g.constInts(axes)];
    const r = x.shape.length;
    const pads = new Array<number>(2 * r).fill(0);
    ax.forEach((a, i) => {
      pads[a] = s[i]!;
      pads[a + r] = x.shape[a]! - e[i]!;
    });
    return [g.pad(d!, pads)];
  },
  ReduceSum: (g, node, [d]) => {
    const [x, axes] = node.inputs as [Value, Value];
    return [g.expand(keepDims(g, d!, x, g.constInts(axes), intAttr(node, 'keepdims', 1)), x.shape)];
  },
  ReduceMean: (g, node, [d]) => {
    const x = node.inputs[0]!;
    const axes = (node.attrs.axes as { ints: readonly number[] }).ints;
    const count = axes.reduce((n, a) => n * x.shape[a < 0 ? a + x.shape.length : a]!, 1);
    return [g.expand(g.mul(keepDims(g, d!, x, axes, intAttr(node, 'keepdims', 1)), g.scalar(1 / count, x.dtype as FloatType)), x.shape)];
  },
  Cast: (g, { inputs: [x] }, [d]) => [g.isFloat(x!) ? g.cast(d!, x!.dtype) : undefined],
};

/** A reduction's gradient reshaped as if keepdims had been set (so it broadcasts against x). */
function keepDims(g: Graph, d: Value, x: Value, axes: readonly number[], keepdims: number): Value {
  if (keepdims === 1) return d;
  const set = new Set(axes.map((a) => (a < 0 ? a + x.shape.length : a)));
  return g.reshape(d, x.shape.map((n, i) => (set.has(i) ? 1 : n)));
}
