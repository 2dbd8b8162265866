import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PRESETS } from '../../src/engine/albert/config.js';
import { estimateTrainingMemory, formatBytes, type TrainingShape } from '../../src/engine/memory-estimate.js';
import { fitGpuMicroBatch, fitMicroBatch, MemoryLimitError, MemoryWatchdog, WATCHDOG_SAMPLES_OVER } from '../../src/training/memory-limit.js';

const MiB = 2 ** 20;

/** A probe that answers the given RSS values in turn. */
function probeOf(values: number[]): { rssBytes(): number } {
  let i = 0;
  return { rssBytes: () => values[Math.min(i++, values.length - 1)]! };
}

test('the watchdog stops training only after 3 samples in a row over the limit, once, naming the use and the limit', () => {
  const reasons: string[] = [];
  const over = 1100 * MiB;
  const under = 900 * MiB;
  const watchdog = new MemoryWatchdog({ limitBytes: 1024 * MiB, probe: probeOf([over, over, under, over, over, over, over]), onExceeded: (r) => reasons.push(r) });
  const tripped = Array.from({ length: 7 }, () => watchdog.sample());
  assert.equal(WATCHDOG_SAMPLES_OVER, 3);
  // two over, a dip (the count restarts), then three in a row trip it; later samples do nothing
  assert.deepEqual(tripped, [false, false, false, false, false, true, false]);
  assert.equal(reasons.length, 1);
  assert.match(reasons[0]!, /memory use 1\.1 GiB stayed over the 1\.0 GiB limit/);
});

test('a process at the limit is not over it', () => {
  const reasons: string[] = [];
  const watchdog = new MemoryWatchdog({ limitBytes: 512 * MiB, probe: probeOf([512 * MiB]), onExceeded: (r) => reasons.push(r) });
  for (let i = 0; i < 5; i++) assert.equal(watchdog.sample(), false);
  assert.deepEqual(reasons, []);
});

test('fitMicroBatch logs the smaller micro-batch it chose and throws MemoryLimitError when one sample does not fit', () => {
  const shape: TrainingShape = { batchSize: 4, seqLen: 128, precision: 'fp32', trainer: 'swarm' };
  const need = (b: number) => estimateTrainingMemory(PRESETS.base, { ...shape, batchSize: b }).totalBytes;
  // the smallest whole MiB limit with room for 2 samples but not 3
  const limitMiB = Math.ceil(need(2) / MiB);
  assert.ok(limitMiB * MiB < need(3));
  const lines: string[] = [];
  const log = { info: (m: string) => lines.push(m) };
  assert.equal(fitMicroBatch(PRESETS.base, shape, limitMiB, log), 2);
  assert.deepEqual(lines, [`memory limit ${limitMiB} MiB: micro-batch 4 → 2 (estimated peak ${formatBytes(need(2))})`]);
  assert.equal(fitMicroBatch(PRESETS.tiny, shape, 4096, log), 4, 'the configured micro-batch when it fits');
  assert.equal(lines.length, 1, 'nothing logged when nothing changes');
  assert.throws(() => fitMicroBatch(PRESETS.base, shape, 512, log), (err: unknown) => err instanceof MemoryLimitError && /needs about [\d.]+ [MG]iB; memory limit is 512 MiB/.test(err.message));
});

test('fitGpuMicroBatch shrinks the micro-batch to what the GPU holds, refuses when one sequence does not fit, and keeps it without a GPU', () => {
  const lines: string[] = [];
  const log = { info: (m: string) => void lines.push(m) };
  const large = PRESETS.large;
  const shape = { seqLen: 512, precision: 'fp32' as const };
  assert.equal(fitGpuMicroBatch(large, shape, 64, null, log), 64, 'no GPU: the host-fitted micro-batch');
  const t4 = { name: 'Tesla T4', freeBytes: 15 * 2 ** 30 };
  const fitted = fitGpuMicroBatch(large, shape, 64, t4, log);
  assert.ok(fitted >= 1 && fitted < 64, `a 15 GiB card holds fewer than 64 sequences of 512 tokens (${fitted})`);
  assert.match(lines.at(-1) ?? '', /^GPU Tesla T4, 15\.0 GiB free: micro-batch 64 → \d+/);
  assert.equal(fitGpuMicroBatch(large, shape, fitted, t4, log), fitted, 'a micro-batch that fits is kept');
  assert.throws(() => fitGpuMicroBatch(large, shape, 4, { name: 'tiny card', freeBytes: 2 ** 20 }, log), (err: unknown) => err instanceof MemoryLimitError && /tiny card has 1 MiB free/.test(err.message));
});
