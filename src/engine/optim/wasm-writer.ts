/**
 * A minimal WebAssembly binary writer: just enough to emit the optimizer's SIMD kernels without a
 * toolchain (the module is assembled in memory at first use). Functions take numeric parameters,
 * return nothing and share one imported memory (`env.memory`). Reference: the WebAssembly core
 * spec, binary format (https://webassembly.github.io/spec/core/binary/) and its SIMD opcodes.
 */
export type ValType = 'i32' | 'f32' | 'v128';

const VALTYPE: Record<ValType, number> = { i32: 0x7f, f32: 0x7d, v128: 0x7b };

export interface WasmFunction {
  readonly name: string;
  readonly params: readonly ValType[];
  /** Locals beyond the parameters, numbered after them. */
  readonly locals: readonly ValType[];
  /** Instructions (see `op`), without the closing `end`. */
  readonly body: readonly number[];
}

function u32(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

function s32(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) return [...out, byte];
    out.push(byte | 0x80);
  }
}

const vec = (items: readonly number[][]): number[] => [...u32(items.length), ...items.flat()];
const name = (s: string): number[] => vec([...Buffer.from(s, 'utf8')].map((b) => [b]));
const section = (id: number, contents: number[]): number[] => [id, ...u32(contents.length), ...contents];
const simd = (opcode: number): number[] => [0xfd, ...u32(opcode)];
/** memarg for 16-byte vectors: alignment 2⁴, offset 0 (callers keep addresses 16-byte aligned). */
const V128_MEMARG = [4, 0];
/** memarg for 8-byte loads at `offset` bytes past the address. */
const memarg64 = (offset: number): number[] => [3, ...u32(offset)];

/** The instructions the kernels use, as bytes. */
export const op = {
  localGet: (i: number): number[] => [0x20, ...u32(i)],
  localSet: (i: number): number[] => [0x21, ...u32(i)],
  localTee: (i: number): number[] => [0x22, ...u32(i)],
  i32Const: (n: number): number[] => [0x41, ...s32(n)],
  i32Add: [0x6a],
  i32GeU: [0x4f],
  block: [0x02, 0x40],
  loop: [0x03, 0x40],
  end: [0x0b],
  br: (depth: number): number[] => [0x0c, ...u32(depth)],
  brIf: (depth: number): number[] => [0x0d, ...u32(depth)],
  v128Load: [...simd(0x00), ...V128_MEMARG],
  v128Store: [...simd(0x0b), ...V128_MEMARG],
  /** Loads 8 bytes (two f32) into the low half, zeroing the high half. */
  v128Load64Zero: (offset: number): number[] => [...simd(0x5d), ...memarg64(offset)],
  f64x2PromoteLowF32x4: simd(0x5f),
  f64x2Add: simd(0xf0),
  f64x2Mul: simd(0xf2),
  f32x4Splat: simd(0x13),
  f32x4Sqrt: simd(0xe3),
  f32x4Add: simd(0xe4),
  f32x4Sub: simd(0xe5),
  f32x4Mul: simd(0xe6),
  f32x4Div: simd(0xe7),
};

/** A module importing `env.memory` (at least `minPages` 64 KiB pages) and exporting `functions` by name. */
export function assembleModule(functions: readonly WasmFunction[]): Uint8Array {
  const types = functions.map((f) => [0x60, ...vec(f.params.map((p) => [VALTYPE[p]])), ...vec([])]);
  const imports = vec([[...name('env'), ...name('memory'), 0x02, 0x00, ...u32(1)]]);
  const funcs = vec(functions.map((_f, i) => u32(i)));
  const exports = vec(functions.map((f, i) => [...name(f.name), 0x00, ...u32(i)]));
  const codes = vec(
    functions.map((f) => {
      // locals are declared as runs of one type
      const runs: number[][] = [];
      for (const t of f.locals) {
        const last = runs[runs.length - 1];
        if (last && last[1] === VALTYPE[t]) last[0]! += 1;
        else runs.push([1, VALTYPE[t]]);
      }
      const body = [...u32(runs.length), ...runs.flatMap(([count, type]) => [...u32(count!), type!]), ...f.body, ...op.end];
      return [...u32(body.length), ...body];
    }),
  );
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, ...section(1, vec(types)), ...section(2, imports), ...section(3, funcs), ...section(7, exports), ...section(10, codes)]);
}
