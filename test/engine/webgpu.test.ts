// The WebGPU provider that onnxruntime-node ships (Vulkan on Linux), which `npm run bench -- gpu
// --provider webgpu` measures: where an adapter exists (CI installs Mesa's software Vulkan driver,
// lavapipe), a small fp32 step on it equals the CPU provider's; where none exists, asking for it fails
// naming the provider instead of running on the CPU unnoticed. (At training batch sizes it does not
// equal it on a real GPU: docs/engine.md, "WebGPU provider".)
import assert from 'node:assert/strict';
import test from 'node:test';
import { probeProvider } from '../../src/doctor/ort-probe.js';
import { PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { compareRuns } from '../../src/engine/compare-runs.js';
import { OrtBackend } from '../../src/engine/ort-backend.js';
import { Rng } from '../../src/engine/rng.js';
import { syntheticBatch } from '../../src/engine/synthetic.js';

const config = PRESETS.tiny;

test('webgpu: a small fp32 step equals the CPU provider’s; without an adapter it fails naming the provider', { timeout: 180_000 }, async (t) => {
  const params = initAlbertParams(config, 3);
  const batch = syntheticBatch(config, 2, 16, new Rng(5));
  const probe = await probeProvider('webgpu');
  if (!probe.ok) {
    const backend = new OrtBackend(config, { provider: 'webgpu' });
    await assert.rejects(backend.forwardBackward(params, batch), /WebGPU execution provider failed to load: /);
    return t.diagnostic(`no WebGPU adapter here (${probe.error}): checked the failure only`);
  }
  const cpu = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 1 });
  const lines: string[] = [];
  const gpu = new OrtBackend(config, { provider: 'webgpu', intraOpThreads: 1, log: { info: (_o: unknown, msg?: string) => void lines.push(String(msg)), warn: () => undefined } });
  try {
    const c = compareRuns(await cpu.forwardBackward(params, batch), await gpu.forwardBackward(params, batch), { loss: 1e-5, gradient: 1e-4 });
    t.diagnostic(`loss off by ${c.lossRelative.toExponential(1)}, worst gradient ${c.worst.name} ${c.worst.relative.toExponential(1)}`);
    assert.deepEqual(c.failures, [], 'WebGPU differs from the CPU provider');
    assert.match(gpu.description, /^onnxruntime webgpu/);
    assert.deepEqual(lines, ['onnxruntime session on WebGPU']);
  } finally {
    await Promise.all([cpu.close(), gpu.close()]);
  }
});
