/**
 * Bench-time cross-check of the optimizers against PyTorch (Debian's python3-torch), when a Python
 * with torch is available; tests never depend on it. Runs a few steps of ours and of torch's on the
 * same float32 weights and gradients and reports the largest difference of the final weights.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createOptimizer, type OptimizerKind } from '../src/engine/optim/index.js';
import { ParameterSet, type ParamSpec } from '../src/engine/params.js';
import { fillNormal } from './_lamb.js';

const LAYOUT: ParamSpec[] = [
  { name: 'albert.embeddings.word_embeddings.weight', shape: [300, 128] }, // spans three kernel blocks
  { name: 'albert.embeddings.LayerNorm.weight', shape: [128] },
  { name: 'albert.embeddings.LayerNorm.bias', shape: [128] },
  { name: 'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight', shape: [64, 33] },
  { name: 'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.bias', shape: [64] },
  { name: 'sop_classifier.classifier.bias', shape: [2] },
];
const LRS = [1e-3, 3e-3, 1e-2, 5e-3, 2e-3];
const CONFIGS = {
  adamw: { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01 },
  lamb: { betas: [0.9, 0.999], eps: 1e-6, weightDecay: 0.01, clampValue: 10 },
} as const;

export type TorchCheck = { readonly python: string; readonly maxAbsDiff: Record<OptimizerKind, number> } | { readonly skipped: string };

/**
 * The environment for the PyTorch side of a benchmark: this machine's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
 * force slower BLAS kernels, which would handicap torch (onnxruntime does not use OpenBLAS).
 */
export function torchEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONUNBUFFERED: '1' };
  delete env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_L2_SIZE;
  return env;
}

/** The first Python that imports torch: COHORT_TORCH_PYTHON, python3, /usr/bin/python3. */
export function findTorchPython(): string | undefined {
  const candidates = [process.env.COHORT_TORCH_PYTHON, 'python3', '/usr/bin/python3'].filter((c): c is string => !!c);
  return candidates.find((python) => spawnSync(python, ['-c', 'import torch'], { stdio: 'ignore', timeout: 60_000 }).status === 0);
}

export function crossCheckTorch(): TorchCheck {
  const python = findTorchPython();
  if (!python) return { skipped: 'no Python with torch (apt-get install python3-torch, or set COHORT_TORCH_PYTHON)' };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-optim-torch-'));
  try {
    const w0 = ParameterSet.allocate(LAYOUT);
    fillNormal(w0.data, 0.05, 11);
    const grads = LRS.map((_lr, s) => {
      const g = w0.zerosLike();
      fillNormal(g.data, 0.01 * (s + 1), 100 + s);
      return g;
    });
    const raw = (x: Float32Array): Uint8Array => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    fs.writeFileSync(path.join(dir, 'spec.json'), JSON.stringify({ tensors: LAYOUT, lrs: LRS, ...CONFIGS }));
    fs.writeFileSync(path.join(dir, 'w0.bin'), raw(w0.data));
    grads.forEach((g, s) => fs.writeFileSync(path.join(dir, `g${s}.bin`), raw(g.data)));
    const script = path.join(path.dirname(fileURLToPath(import.meta.url)), '_torch_optim.py');
    const run = spawnSync(python, [script, dir], { encoding: 'utf8', env: torchEnv(), timeout: 120_000 });
    if (run.status !== 0) throw new Error(`${python} ${script} failed (status ${run.status}): ${run.stderr || run.error?.message}`);
    const maxAbsDiff = {} as Record<OptimizerKind, number>;
    for (const kind of ['adamw', 'lamb'] as const) {
      const ours = w0.clone();
      const { betas, ...rest } = CONFIGS[kind];
      const opt = createOptimizer(ours, { kind, betas: [betas[0], betas[1]], ...rest });
      grads.forEach((g, s) => opt.step(ours, g, LRS[s]!));
      const theirs = new Float32Array(new Uint8Array(fs.readFileSync(path.join(dir, `${kind}.bin`))).buffer);
      if (theirs.length !== ours.size) throw new Error(`torch ${kind} returned ${theirs.length} values, expected ${ours.size}`);
      maxAbsDiff[kind] = ours.data.reduce((worst, x, i) => Math.max(worst, Math.abs(x - theirs[i]!)), 0);
    }
    return { python, maxAbsDiff };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
