import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { PRESETS } from '../../src/engine/albert/config.js';
import { parseNvidiaSmi, planGpuMicroBatch, queryGpus } from '../../src/engine/gpu-memory.js';
import { estimateGpuMemory, estimateTrainingMemory } from '../../src/engine/memory-estimate.js';
import { tmpDir } from '../helpers/tmp.js';

const MiB = 2 ** 20;
/** What nvidia-smi 535 prints for `--query-gpu=memory.free,name --format=csv` on a two-GPU machine. */
const TWO_GPUS = 'memory.free [MiB], name\n15102 MiB, Tesla T4\n40337 MiB, NVIDIA A100-SXM4-40GB, rev. B\n';
/** What nvidia-smi 580.159.04 printed for the same query on the H200 lent on 2026-11-25. */
const H200 = 'memory.free [MiB], name\n143156 MiB, NVIDIA H200\n';

test('nvidia-smi output parses into free bytes and names; anything else is an error naming the line', () => {
  assert.deepEqual(parseNvidiaSmi(TWO_GPUS), [
    { name: 'Tesla T4', freeBytes: 15102 * MiB },
    { name: 'NVIDIA A100-SXM4-40GB, rev. B', freeBytes: 40337 * MiB },
  ]);
  assert.deepEqual(parseNvidiaSmi(H200), [{ name: 'NVIDIA H200', freeBytes: 143156 * MiB }]);
  assert.deepEqual(parseNvidiaSmi('memory.free [MiB], name\n'), []);
  assert.throws(() => parseNvidiaSmi('name, memory.free [MiB]\nTesla T4, 15102 MiB\n'), /unexpected header "name, memory.free \[MiB\]"/);
  assert.throws(() => parseNvidiaSmi('memory.free [MiB], name\n[N/A], Tesla T4\n'), /unreadable line "\[N\/A\], Tesla T4"/);
});

test('queryGpus: null without nvidia-smi or when it fails, the parsed list when it answers', (t) => {
  const dir = tmpDir(t);
  const script = (name: string, body: string) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    return file;
  };
  assert.equal(queryGpus(path.join(dir, 'no-such-nvidia-smi')), null);
  assert.equal(queryGpus(script('no-driver', 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2; exit 9')), null);
  // the fake also checks that the query asks for what the parser reads
  const fake = script('nvidia-smi', `[ "$1" = "--query-gpu=memory.free,name" ] && [ "$2" = "--format=csv" ] || exit 2\nprintf '${TWO_GPUS.replace(/\n/g, '\\n')}'`);
  assert.deepEqual(queryGpus(fake)?.map((g) => g.name), ['Tesla T4', 'NVIDIA A100-SXM4-40GB, rev. B']);
  assert.throws(() => queryGpus(script('odd', 'echo "something else"')), /unexpected header "something else"/);
});

test('the GPU estimate is ORT\'s part of the process estimate plus the CUDA context and the device copy of the parameters', () => {
  const shape = { batchSize: 4, seqLen: 128, precision: 'fp16' as const };
  const process = estimateTrainingMemory(PRESETS.large, { ...shape, trainer: 'local' });
  const gpu = estimateGpuMemory(PRESETS.large, shape);
  // the worker thread (50 MB) is host memory; the trainer's buffers stay on the host
  assert.ok(gpu > process.ortBytes && gpu < process.ortBytes + 1e9, `${gpu} vs ORT ${process.ortBytes}`);
  assert.ok(estimateGpuMemory(PRESETS.large, { ...shape, batchSize: 8 }) > gpu);
  assert.throws(() => estimateGpuMemory(PRESETS.large, { ...shape, batchSize: 0 }), /batch size 0 must be an integer ≥ 1/);
});

test('micro-batch from free GPU memory: the largest that fits 90 % of it, smaller at longer sequences, never above the maximum', () => {
  const t4 = { name: 'Tesla T4', freeBytes: 15102 * MiB };
  const plan = (seqLen: number, gpu = t4, maxBatchSize = 512) => planGpuMicroBatch(PRESETS.large, { seqLen, precision: 'fp16', maxBatchSize }, gpu);
  const at512 = plan(512);
  assert.ok(at512.fits);
  assert.equal(at512.batchSize, 9);
  assert.ok(at512.estimateBytes <= 0.9 * t4.freeBytes);
  assert.ok(estimateGpuMemory(PRESETS.large, { batchSize: 10, seqLen: 512, precision: 'fp16' }) > 0.9 * t4.freeBytes, 'one more does not fit');
  const at128 = plan(128);
  assert.ok(at128.fits && at128.batchSize > 4 * at512.batchSize);
  assert.deepEqual(plan(128, t4, 8), { fits: true, batchSize: 8, estimateBytes: estimateGpuMemory(PRESETS.large, { batchSize: 8, seqLen: 128, precision: 'fp16' }) });
  const small = plan(512, { name: 'GeForce GT 1030', freeBytes: 1800 * MiB });
  assert.equal(small.fits, false);
  assert.match(!small.fits ? small.reason : '', /^one sequence of 512 tokens needs about 2\.\d GiB of GPU memory; GeForce GT 1030 has 1\.8 GiB free$/);
});
