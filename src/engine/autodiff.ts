import { floatTensor, sizeOf, type Graph, type Node, type Shape, type Value } from './onnx/graph.js';
import { RULES } from './rules.js';

/**
 * Reverse-mode autodiff over a built Graph. The backward nodes are appended to the same graph, so a
 * single InferenceSession run returns the loss and every gradient. Each op's vector-Jacobian product
 * lives in the RULES table (rules.ts), a fused composite's next to its forward (`Graph.fused`); rules
 * return gradients in the shape of the op's output where an input was broadcast, and `unbroadcast`
 * below (the only place that does it) sums them back.
 */
export function gradients(g: Graph, loss: Value, wrt: readonly Value[]): Map<string, Value> {
  if (sizeOf(loss.shape) !== 1) throw new Error(`autodiff: loss ${loss.name} must be a scalar, has shape [${loss.shape.join(', ')}]`);
  const forward = g.nodes.slice();

  // values that depend on a wrt input through floating-point ops
  const live = new Set(wrt.map((v) => v.name));
  for (const n of forward) if (n.inputs.some((v) => live.has(v.name))) for (const o of n.outputs) if (g.isFloat(o) && !g.detached.has(o.name)) live.add(o.name);
  if (!live.has(loss.name)) throw new Error(`autodiff: loss ${loss.name} does not depend on any of the inputs`);

  const grads = new Map<string, Value>([[loss.name, g.constant(floatTensor(g.float, loss.shape, [1]), 'dloss')]]);
  for (let i = forward.length - 1; i >= 0; i--) {
    const node = forward[i]!;
    const dOut = node.outputs.map((o) => grads.get(o.name));
    if (dOut.every((d) => d === undefined) || !node.inputs.some((v) => live.has(v.name))) continue;
    const fused = g.fusedVjps.get(node.outputs[0]!.name);
    const rule = RULES[node.op];
    if (!fused && !rule) throw new Error(`autodiff: no gradient rule for ${node.op} (producing ${node.outputs[0]!.name})`);
    const targets = fused ? fused.inputs : node.inputs;
    const dIn = fused ? fused.vjp(g, dOut[0]!) : rule!(g, node, dOut);
    targets.forEach((input, k) => {
      const d = dIn[k];
      if (!d || !live.has(input.name)) return;
      const shaped = unbroadcast(g, node, d, input.shape);
      const prev = grads.get(input.name);
      grads.set(input.name, prev ? g.add(prev, shaped) : shaped);
    });
  }
  return new Map(wrt.map((v) => [v.name, grads.get(v.name) ?? g.zeros(v.shape, v.dtype)]));
}

/** Sums a gradient over the axes along which its input was broadcast, giving it the input's shape. */
function unbroadcast(g: Graph, node: Node, grad: Value, shape: Shape): Value {
  if (grad.shape.length === shape.length && grad.shape.every((d, i) => d === shape[i])) return grad;
  const lead = grad.shape.length - shape.length;
  if (lead < 0) throw new Error(`autodiff: ${node.op} gradient [${grad.shape.join(', ')}] has lower rank than its input [${shape.join(', ')}]`);
  const axes: number[] = [];
  grad.shape.forEach((d, i) => {
    if (i < lead || (shape[i - lead] === 1 && d !== 1)) axes.push(i);
    else if (shape[i - lead] !== d) throw new Error(`autodiff: ${node.op} gradient [${grad.shape.join(', ')}] cannot be un-broadcast to [${shape.join(', ')}]`);
  });
  const summed = axes.length > 0 ? g.reduceSum(grad, axes, true) : grad;
  return summed.shape.length === shape.length ? summed : g.reshape(summed, shape);
}
