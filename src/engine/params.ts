/**
 * All of a model's parameters in one contiguous Float32Array with named views. One flat buffer
 * lets the all-reduce partition the whole model directly and the optimizer walk it without
 * per-tensor allocation; gradients and optimizer moments use the same layout (`zerosLike`).
 */
export interface ParamSpec {
  readonly name: string;
  readonly shape: readonly number[];
}

export interface ParamView extends ParamSpec {
  /** Offset into `ParameterSet.data`, in elements. */
  readonly offset: number;
  /** Number of elements (product of the shape). */
  readonly size: number;
}

export class ParameterSet {
  private readonly byName: ReadonlyMap<string, ParamView>;

  private constructor(
    readonly specs: readonly ParamView[],
    readonly data: Float32Array,
  ) {
    this.byName = new Map(specs.map((s) => [s.name, s]));
  }

  /** Zero-filled parameters with the given names and shapes, laid out in the given order. */
  static allocate(specs: readonly ParamSpec[]): ParameterSet {
    const views = layout(specs);
    return new ParameterSet(views, new Float32Array(views.reduce((n, v) => n + v.size, 0)));
  }

  /**
   * Parameters laid out as `specs` over an existing buffer, without copying (e.g. one that was
   * transferred from another thread); `data` must hold exactly the parameters' elements.
   */
  static wrap(specs: readonly ParamSpec[], data: Float32Array): ParameterSet {
    const views = layout(specs);
    const size = views.reduce((n, v) => n + v.size, 0);
    if (data.length !== size) throw new Error(`ParameterSet.wrap: the buffer holds ${data.length} elements, the ${views.length} parameters ${size}`);
    return new ParameterSet(views, data);
  }

  /** Same layout, zero-filled (gradients, optimizer moments). */
  zerosLike(): ParameterSet {
    return new ParameterSet(this.specs, new Float32Array(this.data.length));
  }

  /** Same layout, copied values. */
  clone(): ParameterSet {
    return new ParameterSet(this.specs, this.data.slice());
  }

  get size(): number {
    return this.data.length;
  }

  names(): string[] {
    return this.specs.map((s) => s.name);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  spec(name: string): ParamView {
    const view = this.byName.get(name);
    if (!view) throw new Error(`no parameter named ${name}`);
    return view;
  }

  /** The live view of one parameter (writes go to `data`). */
  view(name: string): Float32Array {
    const { offset, size } = this.spec(name);
    return this.data.subarray(offset, offset + size);
  }

  /** The first element that is NaN or ±Infinity, by parameter name and index in it; undefined when all are finite. */
  firstNonFinite(): { name: string; index: number; value: number } | undefined {
    for (const s of this.specs) {
      for (let i = s.offset; i < s.offset + s.size; i++) {
        const value = this.data[i]!;
        // value - value is NaN for NaN and ±Infinity, 0 otherwise: one test per element
        if (value - value !== 0) return { name: s.name, index: i - s.offset, value };
      }
    }
    return undefined;
  }

  /** True if `other` has exactly the same names, shapes and order. */
  sameLayout(other: ParameterSet): boolean {
    return other.specs === this.specs || (other.specs.length === this.specs.length && other.specs.every((s, i) => s.name === this.specs[i]!.name && s.shape.join() === this.specs[i]!.shape.join()));
  }
}

/** Offsets of the parameters, in the given order, after checking names and shapes. */
function layout(specs: readonly ParamSpec[]): ParamView[] {
  const views: ParamView[] = [];
  const seen = new Set<string>();
  let offset = 0;
  for (const spec of specs) {
    if (seen.has(spec.name)) throw new Error(`parameter ${spec.name} is declared twice`);
    if (spec.shape.some((d) => !Number.isInteger(d) || d <= 0)) throw new Error(`parameter ${spec.name} has an invalid shape [${spec.shape.join(', ')}]`);
    seen.add(spec.name);
    const size = spec.shape.reduce((a, b) => a * b, 1);
    views.push({ name: spec.name, shape: [...spec.shape], offset, size });
    offset += size;
  }
  return views;
}
