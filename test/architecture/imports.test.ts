// The import graph of src/: no cycle between folders (data flows data → engine → collab ↔ swarm,
// store and UI observe) and none between files. Reads every import with TypeScript's own scanner.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const SRC = path.resolve('src');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : /\.(ts|svelte)$/.test(e.name) ? [p] : [];
  });
}

/** Relative imports of each file, resolved to files (a `.js` specifier names its `.ts` source). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = fs.readFileSync(file, 'utf8');
    const code = file.endsWith('.svelte') ? [...text.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]).join('\n') : text;
    const targets = ts
      .preProcessFile(code, true, true)
      .importedFiles.map((f) => f.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => path.resolve(path.dirname(file), name).replace(/\.js$/, '.ts'))
      .filter((target) => fs.existsSync(target));
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components with more than one node (Tarjan), each as a sorted list. */
function cycles(edges: Map<string, Set<string>>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const on = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) !== idx.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      on.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of edges.keys()) if (!idx.has(v)) visit(v);
  return found;
}

const folderOf = (file: string): string => path.relative(SRC, file).split(path.sep)[0]!;
const rel = (file: string): string => path.relative(SRC, file);

test('no two folders of src/ import each other, directly or through others', () => {
  const edges = new Map<string, Set<string>>();
  const why = new Map<string, string>();
  for (const [file, targets] of importGraph()) {
    for (const target of targets) {
      const [a, b] = [folderOf(file), folderOf(target)];
      if (a === b) continue;
      if (!edges.has(a)) edges.set(a, new Set());
      edges.get(a)!.add(b);
      why.set(`${a}→${b}`, `${rel(file)} imports ${rel(target)}`);
    }
  }
  const found = cycles(edges);
  assert.deepEqual(found, [], found.map((c) => `${c.join(' ↔ ')}: ${[...why].filter(([k]) => c.includes(k.split('→')[0]!) && c.includes(k.split('→')[1]!)).map(([, v]) => v).join('; ')}`).join('\n'));
});

test('no import cycle between files of src/', () => {
  const edges = new Map([...importGraph()].map(([file, targets]) => [file, new Set(targets)]));
  const found = cycles(edges).map((c) => c.map(rel));
  assert.deepEqual(found, []);
});

test('the cycle check finds a cycle (a graph with one)', () => {
  const edges = new Map([
    ['a', new Set(['b'])],
    ['b', new Set(['c'])],
    ['c', new Set(['a'])],
    ['d', new Set(['a'])],
  ]);
  assert.deepEqual(cycles(edges), [['a', 'b', 'c']]);
});
