/**
 * The optimizers' inner loops as WebAssembly SIMD (four float32 lanes per instruction, the same
 * float32 arithmetic torch uses). Each kernel walks `bytes` bytes (a multiple of 16) from the given
 * 16-byte-aligned addresses in the shared memory. Update formulas are documented in lamb.ts and
 * adamw.ts; the comments here give the same formula per instruction group.
 */
import { assembleModule, op, type WasmFunction } from './wasm-writer.js';

const { localGet: get, localSet: set, localTee: tee } = op;

/** Pushes the address `base + i` (both locals). */
const at = (base: number, i: number): number[] => [...get(base), ...get(i), ...op.i32Add];
/** Pushes the vector at `base + i`. */
const load = (base: number, i: number): number[] => [...at(base, i), ...op.v128Load];
/** Broadcasts f32 parameter `from` into v128 local `to`. */
const splat = (from: number, to: number): number[] => [...get(from), ...op.f32x4Splat, ...set(to)];
/** `block loop (exit when i ≥ bytes) …body… i += 16 loop-again end end` */
const forEachVector = (i: number, bytes: number, body: number[]): number[] => [
  ...op.block,
  ...op.loop,
  ...get(i), ...get(bytes), ...op.i32GeU, ...op.brIf(1),
  ...body,
  ...get(i), ...op.i32Const(16), ...op.i32Add, ...set(i),
  ...op.br(0),
  ...op.end,
  ...op.end,
];

/**
 * lamb_moments(m, v, g, w, u, bytes, β₁, 1−β₁, β₂, 1−β₂, ε, λ): m and v updated in place,
 * u = m/(√v+ε) + λw stored, and the lane sums of w² and u² stored at addresses 0 and 16.
 */
function lambMoments(): WasmFunction {
  const [m, v, g, w, uOut, bytes, b1, c1, b2, c2, eps, decay] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
  const [i, B1, C1, B2, C2, EPS, DECAY, gi, wi, mi, vi, u, sumW, sumU] = [12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25];
  return {
    name: 'lamb_moments',
    params: ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'f32', 'f32', 'f32', 'f32', 'f32'],
    locals: ['i32', ...Array<'v128'>(13).fill('v128')],
    body: [
      ...splat(b1, B1), ...splat(c1, C1), ...splat(b2, B2), ...splat(c2, C2), ...splat(eps, EPS), ...splat(decay, DECAY),
      ...forEachVector(i, bytes, [
        ...load(g, i), ...set(gi),
        ...load(w, i), ...set(wi),
        // m ← β₁m + (1−β₁)g
        ...at(m, i), ...get(B1), ...load(m, i), ...op.f32x4Mul, ...get(C1), ...get(gi), ...op.f32x4Mul, ...op.f32x4Add, ...tee(mi), ...op.v128Store,
        // v ← β₂v + (1−β₂)g²
        ...at(v, i), ...get(B2), ...load(v, i), ...op.f32x4Mul, ...get(C2), ...get(gi), ...op.f32x4Mul, ...get(gi), ...op.f32x4Mul, ...op.f32x4Add, ...tee(vi), ...op.v128Store,
        // u = m/(√v+ε) + λw
        ...at(uOut, i), ...get(mi), ...get(vi), ...op.f32x4Sqrt, ...get(EPS), ...op.f32x4Add, ...op.f32x4Div, ...get(DECAY), ...get(wi), ...op.f32x4Mul, ...op.f32x4Add, ...tee(u), ...op.v128Store,
        // Σw², Σu²
        ...get(sumW), ...get(wi), ...get(wi), ...op.f32x4Mul, ...op.f32x4Add, ...set(sumW),
        ...get(sumU), ...get(u), ...get(u), ...op.f32x4Mul, ...op.f32x4Add, ...set(sumU),
      ]),
      ...op.i32Const(0), ...get(sumW), ...op.v128Store,
      ...op.i32Const(16), ...get(sumU), ...op.v128Store,
    ],
  };
}

/** lamb_apply(u, w, bytes, scale): w ← w − scale·u. */
function lambApply(): WasmFunction {
  const [u, w, bytes, scale] = [0, 1, 2, 3];
  const [i, SCALE] = [4, 5];
  return {
    name: 'lamb_apply',
    params: ['i32', 'i32', 'i32', 'f32'],
    locals: ['i32', 'v128'],
    body: [
      ...splat(scale, SCALE),
      ...forEachVector(i, bytes, [
        ...at(w, i), ...load(w, i), ...get(SCALE), ...load(u, i), ...op.f32x4Mul, ...op.f32x4Sub, ...op.v128Store,
      ]),
    ],
  };
}

/**
 * adamw(m, v, g, w, bytes, β₁, 1−β₁, β₂, 1−β₂, ε, keep, stepSize, 1/√(1−β₂ᵗ)):
 * m ← β₁m + (1−β₁)g; v ← β₂v + (1−β₂)g²; w ← keep·w − stepSize·m/(√v/√(1−β₂ᵗ) + ε).
 */
function adamw(): WasmFunction {
  const [m, v, g, w, bytes, b1, c1, b2, c2, eps, keep, stepSize, invRoot] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const [i, B1, C1, B2, C2, EPS, KEEP, STEP, INVROOT, gi, mi, vi] = [13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24];
  return {
    name: 'adamw',
    params: ['i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'f32', 'f32', 'f32', 'f32', 'f32', 'f32', 'f32'],
    locals: ['i32', ...Array<'v128'>(11).fill('v128')],
    body: [
      ...splat(b1, B1), ...splat(c1, C1), ...splat(b2, B2), ...splat(c2, C2), ...splat(eps, EPS), ...splat(keep, KEEP), ...splat(stepSize, STEP), ...splat(invRoot, INVROOT),
      ...forEachVector(i, bytes, [
        ...load(g, i), ...set(gi),
        ...at(m, i), ...get(B1), ...load(m, i), ...op.f32x4Mul, ...get(C1), ...get(gi), ...op.f32x4Mul, ...op.f32x4Add, ...tee(mi), ...op.v128Store,
        ...at(v, i), ...get(B2), ...load(v, i), ...op.f32x4Mul, ...get(C2), ...get(gi), ...op.f32x4Mul, ...get(gi), ...op.f32x4Mul, ...op.f32x4Add, ...tee(vi), ...op.v128Store,
        ...at(w, i),
        ...get(KEEP), ...load(w, i), ...op.f32x4Mul,
        ...get(STEP), ...get(mi), ...op.f32x4Mul, ...get(vi), ...op.f32x4Sqrt, ...get(INVROOT), ...op.f32x4Mul, ...get(EPS), ...op.f32x4Add, ...op.f32x4Div,
        ...op.f32x4Sub,
        ...op.v128Store,
      ]),
    ],
  };
}

/** sum_squares(x, bytes): Σx² in float64, as two f64x2 lane sums stored at addresses 0 and 16. */
function sumSquares(): WasmFunction {
  const [x, bytes] = [0, 1];
  const [i, lo, hi, sumLo, sumHi] = [2, 3, 4, 5, 6];
  return {
    name: 'sum_squares',
    params: ['i32', 'i32'],
    locals: ['i32', 'v128', 'v128', 'v128', 'v128'],
    body: [
      ...forEachVector(i, bytes, [
        ...at(x, i), ...op.v128Load64Zero(0), ...op.f64x2PromoteLowF32x4, ...set(lo),
        ...at(x, i), ...op.v128Load64Zero(8), ...op.f64x2PromoteLowF32x4, ...set(hi),
        ...get(sumLo), ...get(lo), ...get(lo), ...op.f64x2Mul, ...op.f64x2Add, ...set(sumLo),
        ...get(sumHi), ...get(hi), ...get(hi), ...op.f64x2Mul, ...op.f64x2Add, ...set(sumHi),
      ]),
      ...op.i32Const(0), ...get(sumLo), ...op.v128Store,
      ...op.i32Const(16), ...get(sumHi), ...op.v128Store,
    ],
  };
}

/** scale(x, bytes, factor): x ← factor·x. */
function scale(): WasmFunction {
  const [x, bytes, factor] = [0, 1, 2];
  const [i, FACTOR] = [3, 4];
  return {
    name: 'scale',
    params: ['i32', 'i32', 'f32'],
    locals: ['i32', 'v128'],
    body: [...splat(factor, FACTOR), ...forEachVector(i, bytes, [...at(x, i), ...get(FACTOR), ...load(x, i), ...op.f32x4Mul, ...op.v128Store])],
  };
}

/** axpy(y, x, bytes, a): y ← y + a·x. */
function axpy(): WasmFunction {
  const [y, x, bytes, a] = [0, 1, 2, 3];
  const [i, A] = [4, 5];
  return {
    name: 'axpy',
    params: ['i32', 'i32', 'i32', 'f32'],
    locals: ['i32', 'v128'],
    body: [...splat(a, A), ...forEachVector(i, bytes, [...at(y, i), ...load(y, i), ...get(A), ...load(x, i), ...op.f32x4Mul, ...op.f32x4Add, ...op.v128Store])],
  };
}

export interface Kernels {
  // WebAssembly exports are plain functions (no `this`), so they are declared as function properties, not methods
  readonly lamb_moments: (m: number, v: number, g: number, w: number, u: number, bytes: number, beta1: number, c1: number, beta2: number, c2: number, eps: number, decay: number) => void;
  readonly lamb_apply: (u: number, w: number, bytes: number, scale: number) => void;
  readonly adamw: (m: number, v: number, g: number, w: number, bytes: number, beta1: number, c1: number, beta2: number, c2: number, eps: number, keep: number, stepSize: number, invRootCorrection2: number) => void;
  readonly sum_squares: (x: number, bytes: number) => void;
  readonly scale: (x: number, bytes: number, factor: number) => void;
  readonly axpy: (y: number, x: number, bytes: number, a: number) => void;
}

/** The slice of the WebAssembly JS API used here (the project's TypeScript lib has no WebAssembly types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
interface WasmApi {
  Memory: new (descriptor: { initial: number; maximum: number }) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: { env: { memory: WasmMemory } }) => { readonly exports: object };
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

let compiled: object | undefined;

/** A fixed-size memory of `pages` 64 KiB pages with the kernels bound to it (the module is compiled once per process). */
export function instantiateKernels(pages: number): { memory: WasmMemory; kernels: Kernels } {
  compiled ??= new wasm.Module(assembleModule([lambMoments(), lambApply(), adamw(), sumSquares(), scale(), axpy()]));
  const memory = new wasm.Memory({ initial: pages, maximum: pages });
  return { memory, kernels: new wasm.Instance(compiled, { env: { memory } }).exports as Kernels };
}
