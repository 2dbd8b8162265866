import type { ParameterSet, ParamView } from '../params.js';

/**
 * Throws unless `actual` has exactly `expected`'s tensors (names, shapes, order), naming the first
 * tensor that differs so a stale or foreign checkpoint is easy to diagnose. `what` names `actual`.
 */
export function assertSameLayout(expected: ParameterSet, actual: ParameterSet, what: string): void {
  if (expected.sameLayout(actual)) return;
  const a = actual.specs;
  const e = expected.specs;
  for (let i = 0; i < Math.max(a.length, e.length); i++) {
    const want = e[i];
    const got = a[i];
    if (!want) throw new Error(`${what} does not match the parameters: unexpected extra tensor ${got!.name}`);
    if (!got) throw new Error(`${what} does not match the parameters: tensor ${want.name} is missing`);
    if (got.name !== want.name) throw new Error(`${what} does not match the parameters: found tensor ${got.name} where ${want.name} [${want.shape.join(', ')}] was expected (position ${i})`);
    if (got.shape.join() !== want.shape.join()) throw new Error(`${what} does not match the parameters: tensor ${want.name} has shape [${got.shape.join(', ')}], expected [${want.shape.join(', ')}]`);
  }
}

/**
 * Checks sets against one layout, remembering the layouts already found equal so that checking on
 * every step allocates nothing.
 */
export class LayoutGuard {
  private readonly verified = new WeakSet<readonly ParamView[]>();

  constructor(readonly layout: ParameterSet) {
    this.verified.add(layout.specs);
  }

  check(set: ParameterSet, what: string): void {
    if (this.verified.has(set.specs)) return;
    assertSameLayout(this.layout, set, what);
    this.verified.add(set.specs);
  }
}
