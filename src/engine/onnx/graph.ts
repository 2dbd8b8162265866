/**
 * A small typed builder for static-shape ONNX graphs (opset 17). Every value carries its dtype and
 * full shape, computed when the node is added, so shape errors surface at build time with the op
 * named, and the autodiff can read any value's shape without running anything.
 */
import { floatToHalf } from '../fp16.js';

export type DType = 'float16' | 'float32' | 'float64' | 'int32' | 'int64' | 'bool';
export type FloatType = 'float16' | 'float32' | 'float64';
export type Shape = readonly number[];

export interface Value {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: Shape;
}

export type Attr = { readonly i: number } | { readonly f: number } | { readonly ints: readonly number[] } | { readonly s: string } | { readonly t: TensorData };
export type Attrs = Readonly<Record<string, Attr>>;

export interface TensorData {
  readonly dtype: DType;
  readonly shape: Shape;
  /** Little-endian element bytes. */
  readonly bytes: Uint8Array;
}

export interface Node {
  readonly op: string;
  readonly inputs: readonly Value[];
  readonly outputs: readonly Value[];
  readonly attrs: Attrs;
}

export interface FusedVjp {
  readonly inputs: readonly Value[];
  /** Gradients of `inputs` (undefined for none) from the gradient of the fused output. */
  readonly vjp: (g: Graph, d: Value) => readonly (Value | undefined)[];
}

export interface Initializer {
  readonly value: Value;
  readonly data: TensorData;
}

export const sizeOf = (shape: Shape): number => shape.reduce((a, b) => a * b, 1);
const fmt = (s: Shape) => `[${s.join(', ')}]`;
const isFloat = (t: DType): t is FloatType => t === 'float16' || t === 'float32' || t === 'float64';

/** Numpy-style broadcast of two shapes; throws naming the op if they are incompatible. */
function broadcastShapes(op: string, a: Shape, b: Shape): number[] {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new Error(`${op}: shapes ${fmt(a)} and ${fmt(b)} do not broadcast`);
    out.push(da === 1 ? db : da);
  }
  return out;
}

const axis = (a: number, rank: number) => (a < 0 ? a + rank : a);

export class Graph {
  readonly nodes: Node[] = [];
  readonly inputs: Value[] = [];
  readonly outputs: Value[] = [];
  readonly initializers: Initializer[] = [];
  /** Values produced by `detach`: gradients do not flow through them. */
  readonly detached = new Set<string>();
  /** Outputs of `fused` composites: autodiff applies their own VJP instead of differentiating the inside. */
  readonly fusedVjps = new Map<string, FusedVjp>();
  private readonly names = new Set<string>();
  private counter = 0;

  /** `float` is the dtype of every floating-point tensor the model builds (float64 for gradient checks). */
  constructor(readonly float: FloatType = 'float32') {}

  private fresh(hint: string): string {
    let name = `${hint}_${this.counter++}`;
    while (this.names.has(name)) name = `${hint}_${this.counter++}`;
    this.names.add(name);
    return name;
  }

  private claim(name: string): string {
    if (this.names.has(name)) throw new Error(`graph: value name ${name} is already used`);
    this.names.add(name);
    return name;
  }

  input(name: string, shape: Shape, dtype: DType = this.float): Value {
    const v: Value = { name: this.claim(name), dtype, shape: [...shape] };
    this.inputs.push(v);
    return v;
  }

  /** Marks `v` as a graph output under `name` (through an Identity, so names stay unique). */
  output(v: Value, name: string): Value {
    const out: Value = { name: this.claim(name), dtype: v.dtype, shape: v.shape };
    this.nodes.push({ op: 'Identity', inputs: [v], outputs: [out], attrs: {} });
    this.outputs.push(out);
    return out;
  }

  constant(data: TensorData, hint = 'const'): Value {
    const value: Value = { name: this.fresh(hint), dtype: data.dtype, shape: data.shape };
    this.initializers.push({ value, data });
    return value;
  }

  /** The same value, but a constant to autodiff (a stop-gradient). */
  detach(x: Value): Value {
    const y = this.one('Identity', [x], x.shape);
    this.detached.add(y.name);
    return y;
  }

  /**
   * A composite op built from primitives with a hand-written VJP: autodiff calls `vjp` with the
   * output's gradient and skips the inside, so only what `vjp` uses stays alive for the backward.
   */
  fused(inputs: readonly Value[], forward: Value, vjp: FusedVjp['vjp']): Value {
    const y = this.one('Identity', [forward], forward.shape);
    this.fusedVjps.set(y.name, { inputs, vjp });
    return y;
  }

  /** A float scalar of the graph's float type (or of `dtype`, e.g. inside a float16 region). */
  scalar(x: number, dtype: FloatType = this.float): Value {
    return this.constant(floatTensor(dtype, [], [x]), 'scalar');
  }

  /** A 1-D int64 constant (shapes, axes, pads). */
  ints(xs: readonly number[]): Value {
    return this.constant(int64Tensor([xs.length], xs), 'ints');
  }

  /** Adds one node; `outs` gives each output's shape and dtype. */
  node(op: string, inputs: readonly Value[], outs: readonly { shape: Shape; dtype: DType }[], attrs: Attrs = {}): Value[] {
    const outputs = outs.map((o, i) => ({ name: this.fresh(`${op}${outs.length > 1 ? `o${i}` : ''}`), dtype: o.dtype, shape: [...o.shape] }));
    this.nodes.push({ op, inputs, outputs, attrs });
    return outputs;
  }

  private one(op: string, inputs: readonly Value[], shape: Shape, dtype: DType = inputs[0]!.dtype, attrs: Attrs = {}): Value {
    return this.node(op, inputs, [{ shape, dtype }], attrs)[0]!;
  }

  private binary(op: string, a: Value, b: Value, dtype: DType = a.dtype): Value {
    if (a.dtype !== b.dtype) throw new Error(`${op}: dtypes ${a.dtype} (${a.name}) and ${b.dtype} (${b.name}) differ`);
    return this.one(op, [a, b], broadcastShapes(op, a.shape, b.shape), dtype);
  }

  add(a: Value, b: Value): Value { return this.binary('Add', a, b); }
  sub(a: Value, b: Value): Value { return this.binary('Sub', a, b); }
  mul(a: Value, b: Value): Value { return this.binary('Mul', a, b); }
  div(a: Value, b: Value): Value { return this.binary('Div', a, b); }
  max(a: Value, b: Value): Value { return this.binary('Max', a, b); }
  equal(a: Value, b: Value): Value { return this.binary('Equal', a, b, 'bool'); }
  not(x: Value): Value { return this.one('Not', [x], x.shape); }
  neg(x: Value): Value { return this.one('Neg', [x], x.shape); }
  exp(x: Value): Value { return this.one('Exp', [x], x.shape); }
  tanh(x: Value): Value { return this.one('Tanh', [x], x.shape); }
  sigmoid(x: Value): Value { return this.one('Sigmoid', [x], x.shape); }
  softmax(x: Value): Value { return this.one('Softmax', [x], x.shape, x.dtype, { axis: { i: -1 } }); }
  logSoftmax(x: Value): Value { return this.one('LogSoftmax', [x], x.shape, x.dtype, { axis: { i: -1 } }); }
  cast(x: Value, to: DType): Value { return this.one('Cast', [x], x.shape, to, { to: { i: ONNX_CODES[to] } }); }

  /** Batched matrix product [..., m, k] × [..., k, n] with broadcast batch dimensions. */
  matmul(a: Value, b: Value): Value {
    if (a.shape.length < 2 || b.shape.length < 2) throw new Error(`MatMul: operands must be at least 2-D, got ${fmt(a.shape)} × ${fmt(b.shape)}`);
    const [m, k] = a.shape.slice(-2) as [number, number];
    const [k2, n] = b.shape.slice(-2) as [number, number];
    if (k !== k2) throw new Error(`MatMul: inner dimensions differ: ${fmt(a.shape)} × ${fmt(b.shape)}`);
    const batch = broadcastShapes('MatMul', a.shape.slice(0, -2), b.shape.slice(0, -2));
    return this.one('MatMul', [a, b], [...batch, m, n]);
  }

  /** 2-D a' × b' + c where x' = xᵀ if trans; c (optional) broadcasts to [m, n]. */
  gemm(a: Value, b: Value, c: Value | undefined, transA = false, transB = false): Value {
    if (a.shape.length !== 2 || b.shape.length !== 2) throw new Error(`Gemm: operands must be 2-D, got ${fmt(a.shape)} × ${fmt(b.shape)}`);
    const [m, k] = transA ? [a.shape[1]!, a.shape[0]!] : [a.shape[0]!, a.shape[1]!];
    const [k2, n] = transB ? [b.shape[1]!, b.shape[0]!] : [b.shape[0]!, b.shape[1]!];
    if (k !== k2) throw new Error(`Gemm: inner dimensions differ: ${fmt(a.shape)}${transA ? 'ᵀ' : ''} × ${fmt(b.shape)}${transB ? 'ᵀ' : ''}`);
    if (c) broadcastShapes('Gemm', c.shape, [m, n]);
    return this.one('Gemm', c ? [a, b, c] : [a, b], [m, n], a.dtype, { transA: { i: transA ? 1 : 0 }, transB: { i: transB ? 1 : 0 } });
  }

  /** LayerNormalization over the last axis; also returns the saved mean and 1/σ ([..., 1], float32 as opset 17 requires). */
  layerNorm(x: Value, gamma: Value, beta: Value, epsilon: number): { y: Value; mean: Value; invStd: Value } {
    const stats = { shape: [...x.shape.slice(0, -1), 1], dtype: 'float32' as const };
    const [y, mean, invStd] = this.node('LayerNormalization', [x, gamma, beta], [{ shape: x.shape, dtype: x.dtype }, stats, stats], { axis: { i: -1 }, epsilon: { f: epsilon } });
    return { y: y!, mean: mean!, invStd: invStd! };
  }

  reshape(x: Value, shape: Shape): Value {
    if (sizeOf(shape) !== sizeOf(x.shape)) throw new Error(`Reshape: ${x.name} ${fmt(x.shape)} cannot become ${fmt(shape)}`);
    return this.one('Reshape', [x, this.ints(shape)], shape);
  }

  transpose(x: Value, perm: readonly number[]): Value {
    if (perm.length !== x.shape.length) throw new Error(`Transpose: perm [${perm.join(', ')}] does not match ${fmt(x.shape)}`);
    return this.one('Transpose', [x], perm.map((p) => x.shape[p]!), x.dtype, { perm: { ints: perm } });
  }

  /** x[start:end] along each given axis (steps of 1, non-negative in-range bounds). */
  slice(x: Value, starts: readonly number[], ends: readonly number[], axes: readonly number[]): Value {
    const shape = [...x.shape];
    axes.forEach((a, i) => {
      const ax = axis(a, x.shape.length);
      if (!(starts[i]! >= 0 && starts[i]! < ends[i]! && ends[i]! <= x.shape[ax]!)) throw new Error(`Slice: [${starts[i]}, ${ends[i]}) is outside axis ${ax} of ${fmt(x.shape)}`);
      shape[ax] = ends[i]! - starts[i]!;
    });
    return this.one('Slice', [x, this.ints(starts), this.ints(ends), this.ints(axes.map((a) => axis(a, x.shape.length)))], shape, x.dtype);
  }

  /** Zero padding; `pads` is ONNX's [begin_0, …, begin_n, end_0, …, end_n]. */
  pad(x: Value, pads: readonly number[]): Value {
    const r = x.shape.length;
    if (pads.length !== 2 * r) throw new Error(`Pad: ${pads.length} pads for rank ${r}`);
    return this.one('Pad', [x, this.ints(pads)], x.shape.map((d, i) => d + pads[i]! + pads[i + r]!));
  }

  private reduced(x: Value, axes: readonly number[], keepdims: boolean): number[] {
    const set = new Set(axes.map((a) => axis(a, x.shape.length)));
    return x.shape.flatMap((d, i) => (set.has(i) ? (keepdims ? [1] : []) : [d]));
  }

  /** Sum over `axes` (all axes when empty). */
  reduceSum(x: Value, axes: readonly number[], keepdims = true): Value {
    const all = axes.length === 0 ? x.shape.map((_, i) => i) : axes;
    return this.one('ReduceSum', [x, this.ints(all)], this.reduced(x, all, keepdims), x.dtype, { keepdims: { i: keepdims ? 1 : 0 } });
  }

  /** Mean over `axes` (ReduceMean-13 takes axes as an attribute, unlike ReduceSum-13). */
  reduceMean(x: Value, axes: readonly number[], keepdims = true): Value {
    const all = axes.length === 0 ? x.shape.map((_, i) => i) : axes;
    return this.one('ReduceMean', [x], this.reduced(x, all, keepdims), x.dtype, { axes: { ints: all }, keepdims: { i: keepdims ? 1 : 0 } });
  }

  /**
   * The index of the largest element along the last axis (the first one on ties, as ArgMax), as TopK
   * with k = 1: ArgMax-13 has no CUDA kernel in onnxruntime (its CUDA ArgMax stops at opset 11).
   */
  argMaxLast(x: Value): Value {
    const shape = [...x.shape.slice(0, -1), 1];
    const [, indices] = this.node('TopK', [x, this.ints([1])], [{ shape, dtype: x.dtype }, { shape, dtype: 'int64' }], { axis: { i: -1 }, largest: { i: 1 }, sorted: { i: 1 } });
    return this.reshape(indices!, x.shape.slice(0, -1));
  }

  /** data[indices] along axis 0. */
  gather(data: Value, indices: Value): Value {
    return this.one('Gather', [data, indices], [...indices.shape, ...data.shape.slice(1)], data.dtype, { axis: { i: 0 } });
  }

  /** out = data; out[indices[i]] += updates[i] (repeated indices accumulate). indices: int64 [N, 1]. */
  scatterAdd(data: Value, indices: Value, updates: Value): Value {
    return this.one('ScatterND', [data, indices, updates], data.shape, data.dtype, { reduction: { s: 'add' } });
  }

  /** Joins values along `axis` (every other dimension must match). */
  concat(values: readonly Value[], ax: number): Value {
    const first = values[0]!;
    const a = axis(ax, first.shape.length);
    for (const v of values) {
      if (v.dtype !== first.dtype || v.shape.length !== first.shape.length || v.shape.some((d, i) => i !== a && d !== first.shape[i])) {
        throw new Error(`Concat: ${v.name} ${v.dtype} ${fmt(v.shape)} does not join ${first.name} ${first.dtype} ${fmt(first.shape)} on axis ${a}`);
      }
    }
    const shape = first.shape.map((d, i) => (i === a ? values.reduce((n, v) => n + v.shape[a]!, 0) : d));
    return this.one('Concat', values, shape, first.dtype, { axis: { i: a } });
  }

  /** cond ? a : b elementwise, broadcast. */
  where(cond: Value, a: Value, b: Value): Value {
    if (cond.dtype !== 'bool') throw new Error(`Where: condition ${cond.name} is ${cond.dtype}, not bool`);
    if (a.dtype !== b.dtype) throw new Error(`Where: dtypes ${a.dtype} (${a.name}) and ${b.dtype} (${b.name}) differ`);
    return this.one('Where', [cond, a, b], broadcastShapes('Where', cond.shape, broadcastShapes('Where', a.shape, b.shape)), a.dtype);
  }

  /** Broadcasts x up to `shape`. */
  expand(x: Value, shape: Shape): Value {
    return this.one('Expand', [x, this.ints(shape)], broadcastShapes('Expand', x.shape, shape));
  }

  /** The int64 values of a constant made by `ints` (rules read Slice bounds back this way). */
  constInts(v: Value): number[] {
    const init = this.initializers.find((i) => i.value === v);
    if (!init || init.data.dtype !== 'int64') throw new Error(`graph: ${v.name} is not an int64 constant`);
    const b = init.data.bytes;
    return Array.from(new BigInt64Array(b.buffer, b.byteOffset, b.byteLength / 8), Number);
  }

  zeros(shape: Shape, dtype: DType = this.float): Value {
    return this.one('ConstantOfShape', [this.ints(shape)], shape, dtype, { value: { t: zeroOf(dtype) } });
  }

  isFloat(v: Value): boolean {
    return isFloat(v.dtype);
  }
}

export const ONNX_CODES: Record<DType, number> = { float32: 1, int32: 6, int64: 7, bool: 9, float16: 10, float64: 11 };

/** A one-element zero of `dtype` (ConstantOfShape's fill value). */
function zeroOf(dtype: DType): TensorData {
  if (isFloat(dtype)) return floatTensor(dtype, [1], [0]);
  if (dtype === 'int64') return int64Tensor([1], [0]);
  if (dtype === 'int32') return int32Tensor([1], [0]);
  return { dtype: 'bool', shape: [1], bytes: new Uint8Array(1) };
}

export function floatTensor(dtype: FloatType, shape: Shape, values: ArrayLike<number>): TensorData {
  // float16 elements are IEEE binary16 bit patterns (round-to-nearest-even)
  const arr = dtype === 'float64' ? Float64Array.from(values) : dtype === 'float16' ? Uint16Array.from(Array.from(values, floatToHalf)) : Float32Array.from(values);
  if (arr.length !== sizeOf(shape)) throw new Error(`floatTensor: ${arr.length} values for shape ${fmt(shape)}`);
  return { dtype, shape, bytes: new Uint8Array(arr.buffer) };
}

export function int32Tensor(shape: Shape, values: ArrayLike<number>): TensorData {
  const arr = Int32Array.from(values);
  if (arr.length !== sizeOf(shape)) throw new Error(`int32Tensor: ${arr.length} values for shape ${fmt(shape)}`);
  return { dtype: 'int32', shape, bytes: new Uint8Array(arr.buffer) };
}

export function int64Tensor(shape: Shape, values: ArrayLike<number>): TensorData {
  const arr = BigInt64Array.from(Array.from(values, (v) => BigInt(v)));
  if (arr.length !== sizeOf(shape)) throw new Error(`int64Tensor: ${arr.length} values for shape ${fmt(shape)}`);
  return { dtype: 'int64', shape, bytes: new Uint8Array(arr.buffer) };
}
