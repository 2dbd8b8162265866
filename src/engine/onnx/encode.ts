import { ATTR_TYPE, IR_VERSION, ModelProto, OPSET } from './schema.js';
import { ONNX_CODES, type Attr, type Graph, type Node, type TensorData, type Value } from './graph.js';

/**
 * Serializes a built graph as ONNX ModelProto bytes (opset 17, every dimension fixed). Nodes and
 * constants that no output depends on are dropped: rules may build gradients nobody asks for (e.g.
 * of a constant operand), and a dropped node also stops keeping its inputs alive in ORT's memory plan.
 */
export function encodeModel(graph: Graph, name = 'cohort'): Uint8Array {
  const kept = liveNodes(graph);
  const needed = new Set([...graph.outputs.map((v) => v.name), ...kept.flatMap((n) => n.inputs.map((v) => v.name))]);
  const message = {
    ir_version: IR_VERSION,
    producer_name: 'cohort',
    opset_import: [{ domain: '', version: OPSET }],
    graph: {
      name,
      node: kept.map((n, i) => ({
        name: nodeName(n, i),
        op_type: n.op,
        input: n.inputs.map((v) => v.name),
        output: n.outputs.map((v) => v.name),
        attribute: Object.entries(n.attrs).map(([k, a]) => attribute(k, a)),
      })),
      initializer: graph.initializers.filter((init) => needed.has(init.value.name)).map((init) => tensor(init.data, init.value.name)),
      input: graph.inputs.map(valueInfo),
      output: graph.outputs.map(valueInfo),
    },
  };
  return ModelProto.encode(ModelProto.fromObject(message)).finish();
}

/** The nodes an output depends on, in graph order: what encodeModel writes and onnxruntime runs. */
export function liveNodes(graph: Graph): Node[] {
  const needed = new Set(graph.outputs.map((v) => v.name));
  const kept: Node[] = [];
  for (let i = graph.nodes.length - 1; i >= 0; i--) {
    const n = graph.nodes[i]!;
    if (!n.outputs.some((o) => needed.has(o.name))) continue;
    for (const v of n.inputs) needed.add(v.name);
    kept.push(n);
  }
  return kept.reverse();
}

/** The name encodeModel gives the i-th live node (what onnxruntime's logs and profiles show). */
export const nodeName = (n: Node, i: number): string => `${n.op}_${i}`;

function valueInfo(v: Value) {
  return { name: v.name, type: { tensor_type: { elem_type: ONNX_CODES[v.dtype], shape: { dim: v.shape.map((d) => ({ dim_value: d })) } } } };
}

function tensor(t: TensorData, name = '') {
  return { name, dims: [...t.shape], data_type: ONNX_CODES[t.dtype], raw_data: t.bytes };
}

function attribute(name: string, a: Attr) {
  if ('i' in a) return { name, type: ATTR_TYPE.INT, i: a.i };
  if ('f' in a) return { name, type: ATTR_TYPE.FLOAT, f: a.f };
  if ('ints' in a) return { name, type: ATTR_TYPE.INTS, ints: [...a.ints] };
  if ('s' in a) return { name, type: ATTR_TYPE.STRING, s: Buffer.from(a.s, 'utf8') };
  return { name, type: ATTR_TYPE.TENSOR, t: tensor(a.t) };
}
