import { liveNodes, nodeName } from '../onnx/encode.js';
import type { DType, Graph, Node } from '../onnx/graph.js';
import { OPSET } from '../onnx/schema.js';
import { cudaKernelRows, type KernelRow, type KernelSignature } from './table.js';

/**
 * Which nodes of a graph onnxruntime's CUDA provider has no kernel for. onnxruntime assigns a node to
 * CUDA only when a kernel is registered for its domain, op, opset and types; any other node runs on the
 * CPU, with copies to and from the device around it every step (or, with CPU fallback disabled as
 * OrtBackend's CUDA sessions are, the session fails to load).
 */

/**
 * The version of each op the graph builder emits (and of ArgMax, which it no longer does) at opset 17:
 * the `since_version` of its newest ONNX schema ≤ 17 (onnx.defs.get_schema(op, 17).since_version, onnx
 * 1.12). onnxruntime matches kernels against this number, not against the model's opset.
 */
const SINCE_VERSION_AT_OPSET_17: Readonly<Record<string, number>> = {
  Add: 14, ArgMax: 13, Cast: 13, Concat: 13, ConstantOfShape: 9, Div: 14, Equal: 13, Exp: 13, Expand: 13, Gather: 13,
  Gemm: 13, Identity: 16, LayerNormalization: 17, LogSoftmax: 13, MatMul: 13, Max: 13, Mul: 14, Neg: 13, Not: 1,
  Pad: 13, ReduceMean: 13, ReduceSum: 13, Reshape: 14, ScatterND: 16, Sigmoid: 13, Slice: 13, Softmax: 13, Sub: 14,
  Tanh: 13, TopK: 11, Transpose: 13, Where: 16,
};

/** onnxruntime's name of each graph dtype in its kernel table. */
const ORT_TYPE: Readonly<Record<DType, string>> = {
  float16: 'tensor(float16)', float32: 'tensor(float)', float64: 'tensor(double)', int32: 'tensor(int32)', int64: 'tensor(int64)', bool: 'tensor(bool)',
};

export interface UncoveredNode {
  /** The node's name in the encoded model (`Op_index`), and the value it produces. */
  readonly node: string;
  readonly output: string;
  readonly op: string;
  readonly sinceVersion: number | undefined;
  /** What is missing, e.g. "input 0 (A) is tensor(int32); MatMul-13 accepts T = tensor(bfloat16), …". */
  readonly reason: string;
}

/** Every node of `graph` that onnxruntime would run (dead nodes are not encoded) without a CUDA kernel. */
export function uncoveredCudaNodes(graph: Graph, rows: readonly KernelRow[] = cudaKernelRows()): UncoveredNode[] {
  if (OPSET !== 17) throw new Error(`CUDA coverage: the since-version table is for opset 17, the graphs use opset ${String(OPSET)}`);
  const uncovered: UncoveredNode[] = [];
  liveNodes(graph).forEach((node, i) => {
    const reason = missingKernel(node, rows);
    if (reason !== undefined) uncovered.push({ node: nodeName(node, i), output: node.outputs[0]!.name, op: node.op, sinceVersion: SINCE_VERSION_AT_OPSET_17[node.op], reason });
  });
  return uncovered;
}

/** Why `node` has no CUDA kernel, or undefined when one matches. */
function missingKernel(node: Node, rows: readonly KernelRow[]): string | undefined {
  const since = SINCE_VERSION_AT_OPSET_17[node.op];
  if (since === undefined) return `op ${node.op} is not in the since-version table of coverage.ts (add its onnx since_version at opset 17)`;
  const ofOp = rows.filter((r) => r.domain === 'ai.onnx' && r.op === node.op);
  if (ofOp.length === 0) return `no CUDA kernel for ${node.op} at any opset`;
  const matching = ofOp.filter((r) => versionMatches(r, since));
  if (matching.length === 0) return `no CUDA kernel for ${node.op}-${since}: kernels are registered for ${ofOp.map(versionText).join(', ')}`;
  const mismatches = matching.map((row) => typeMismatch(node, row));
  if (mismatches.some((m) => m === undefined)) return undefined;
  return mismatches.join('; ');
}

/**
 * onnxruntime's rule (KernelRegistry::VerifyKernelDef): a kernel registered from version `start` with no
 * end matches only a node whose since-version is exactly `start`; a range [start, end] matches any
 * since-version inside it. So "ScatterND 13+" does not run ScatterND-16.
 */
function versionMatches(row: KernelRow, since: number): boolean {
  return row.start === since || (row.start < since && row.end !== Infinity && row.end >= since);
}

const versionText = (r: KernelRow) => (r.end === Infinity ? `${r.start}+` : r.start === r.end ? `${r.start}` : `[${r.start}, ${r.end}]`);

/** Why this row does not take the node's types (undefined when one of its signatures does). */
function typeMismatch(node: Node, row: KernelRow): string | undefined {
  const problems: string[] = [];
  for (const signature of row.signatures) {
    const problem = signatureMismatch(node, row, signature);
    if (problem === undefined) return undefined;
    problems.push(problem);
  }
  // the most specific explanation: a signature that applies to the node but not to one of its types
  return `${node.op}-${versionText(row)}: ${problems.find((p) => !p.startsWith(NOT_THIS_SIGNATURE)) ?? problems[0]}`;
}

/** The start of a mismatch saying the signature does not apply to the node at all (its arity, or a constraint of another opset version). */
const NOT_THIS_SIGNATURE = 'not this signature: ';

function signatureMismatch(node: Node, row: KernelRow, signature: KernelSignature): string | undefined {
  const { inputs, outputs } = signature;
  // optional trailing inputs may be omitted; the variadic last input of Concat and Max may repeat
  const variadic = ['inputs', 'data_0'].includes(inputs.at(-1)?.name ?? '');
  if (outputs.length < node.outputs.length || (node.inputs.length > inputs.length && !variadic)) {
    return `${NOT_THIS_SIGNATURE}${node.inputs.length} inputs / ${node.outputs.length} outputs do not fit (${inputs.map((a) => a.name).join(', ')}) → (${outputs.map((a) => a.name).join(', ')})`;
  }
  const check = (kind: 'input' | 'output', index: number, dtype: DType, arg: { name: string; type: string }): string | undefined => {
    const type = ORT_TYPE[dtype];
    const accepted = arg.type.startsWith('tensor(') ? new Set([arg.type]) : row.types.get(arg.type);
    if (!accepted) return `${NOT_THIS_SIGNATURE}${arg.type} is not constrained by this version's types`;
    return accepted.has(type) ? undefined : `${kind} ${index} (${arg.name}) is ${type}; ${arg.type} accepts ${[...accepted].join(', ')}`;
  };
  for (const [i, v] of node.inputs.entries()) {
    const problem = check('input', i, v.dtype, inputs[Math.min(i, inputs.length - 1)]!);
    if (problem) return problem;
  }
  for (const [i, v] of node.outputs.entries()) {
    const problem = check('output', i, v.dtype, outputs[i]!);
    if (problem) return problem;
  }
  return undefined;
}

/** One line per uncovered node: what a failing check prints. */
export function describeUncovered(nodes: readonly UncoveredNode[]): string {
  return nodes.map((n) => `${n.node} (${n.op}-${n.sinceVersion ?? '?'}, producing ${n.output}): ${n.reason}`).join('\n');
}
