import fs from 'node:fs';

/**
 * onnxruntime's CUDA kernel table (cuda-operator-kernels.md beside this file, vendored from its
 * docs/OperatorKernels.md; the file's header says from where) parsed into data: one KernelRow per
 * registered version range of an op, with the op's input/output signatures and the types each type
 * constraint accepts.
 */

/** One argument of an op's signature: its name and its type constraint ("T") or fixed type ("tensor(int64)"). */
export interface KernelArg {
  readonly name: string;
  readonly type: string;
}

export interface KernelSignature {
  readonly inputs: readonly KernelArg[];
  readonly outputs: readonly KernelArg[];
}

export interface KernelRow {
  /** "ai.onnx" for the default ONNX domain. */
  readonly domain: string;
  readonly op: string;
  /** The registered opset range: "13+" is [13, Infinity], "[7, 12]" is [7, 12], "11" is [11, 11]. */
  readonly start: number;
  readonly end: number;
  /** The op's signature variants (the table lists one per opset generation, joined by "or"). */
  readonly signatures: readonly KernelSignature[];
  /** Type constraint → accepted types, e.g. T → {tensor(float), tensor(float16)}. */
  readonly types: ReadonlyMap<string, ReadonlySet<string>>;
}

const CUDA_KERNEL_TABLE = new URL('./cuda-operator-kernels.md', import.meta.url);

let cached: readonly KernelRow[] | undefined;
/** Reads and parses the vendored CUDA kernel table (cached: the file never changes at run time). */
export function cudaKernelRows(): readonly KernelRow[] {
  cached ??= parseKernelTable(fs.readFileSync(CUDA_KERNEL_TABLE, 'utf8'));
  return cached;
}

/**
 * Parses the markdown rows of an OperatorKernels.md section: `|Op|signature|opset|types|` starts an op,
 * `|||opset|types|` adds a version range of the same op, `|**Operator Domain:** *name*||||` switches domain.
 * Anything else that is not a table row (comments, blank lines, header rows) is skipped; a row that does not
 * parse is an error naming its line.
 */
export function parseKernelTable(text: string): KernelRow[] {
  const rows: KernelRow[] = [];
  let domain: string | undefined;
  let current: { op: string; signatures: KernelSignature[] } | undefined;
  text.split('\n').forEach((line, index) => {
    const fail = (why: string) => new Error(`CUDA kernel table line ${index + 1}: ${why}: ${line.slice(0, 120)}`);
    if (!line.startsWith('|') || /^\|\s*\|$/.test(line) || line.startsWith('|---') || line.startsWith('| Op Name')) return;
    const domainMatch = /^\|\*\*Operator Domain:\*\* \*([^*]+)\*\|/.exec(line);
    if (domainMatch) {
      domain = domainMatch[1];
      current = undefined;
      return;
    }
    const cells = line.split('|');
    if (cells.length !== 6) throw fail(`expected 4 cells, found ${cells.length - 2}`);
    const [, op, signature, version, types] = cells as [string, string, string, string, string];
    if (!domain) throw fail('row before any operator domain');
    if (op !== '') current = { op, signatures: parseSignatures(signature, fail) };
    else if (!current || signature !== '') throw fail('continuation row without an op above it');
    rows.push({ domain, op: current.op, ...parseVersion(version, fail), signatures: current.signatures, types: parseTypes(types, fail) });
  });
  return rows;
}

function parseVersion(cell: string, fail: (why: string) => Error): { start: number; end: number } {
  let m = /^(\d+)\+$/.exec(cell);
  if (m) return { start: Number(m[1]), end: Infinity };
  m = /^\[(\d+), (\d+)\]$/.exec(cell);
  if (m) return { start: Number(m[1]), end: Number(m[2]) };
  m = /^(\d+)$/.exec(cell);
  if (m) return { start: Number(m[1]), end: Number(m[1]) };
  throw fail(`unreadable opset version "${cell}"`);
}

function parseSignatures(cell: string, fail: (why: string) => Error): KernelSignature[] {
  return cell.split('<br><br>or<br><br>').map((variant) => {
    const inputs: KernelArg[] = [];
    const outputs: KernelArg[] = [];
    for (const part of variant.split('<br>')) {
      const m = /^\s*\*(in|out)\* ([^:]+):\*\*([^*]+)\*\*$/.exec(part);
      if (!m) throw fail(`unreadable argument "${part}"`);
      (m[1] === 'in' ? inputs : outputs).push({ name: m[2]!, type: m[3]! });
    }
    return { inputs, outputs };
  });
}

function parseTypes(cell: string, fail: (why: string) => Error): Map<string, Set<string>> {
  const types = new Map<string, Set<string>>();
  for (const part of cell.split('<br/>')) {
    const m = /^\s*\*\*([^*]+)\*\* = (.+)$/.exec(part);
    if (!m) throw fail(`unreadable type constraint "${part}"`);
    types.set(m[1]!, new Set(m[2]!.split(', ')));
  }
  return types;
}
