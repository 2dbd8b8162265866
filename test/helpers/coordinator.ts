import type { TestContext } from 'node:test';
import { createAverager } from '../../src/averaging/index.js';
import { Coordinator } from '../../src/collab/coordinator.js';
import { STATE_PREFIX } from '../../src/collab/optimizer.js';
import { encodeTrainingState } from '../../src/collab/state.js';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer } from '../../src/engine/index.js';
import type { Store } from '../../src/store/index.js';
import { warningLog } from './log.js';
import { publishProgress } from './progress.js';
import { startSwarm } from './swarm.js';

/**
 * Real loopback nodes: a coordinator on `store` checkpointing every epoch (polled by the test) and a
 * donor serving the tiny model's state of epoch 2 (`vocabSize` tokens) with its progress at that epoch.
 */
export async function coordinatorWithDonorAtEpoch2(t: TestContext, o: { runId: string; dataDir: string; store: Store; vocabSize?: number; keepCheckpoints?: number }): Promise<{ coordinator: Coordinator; warnings: string[] }> {
  const [coordinatorNode, donor] = await startSwarm(t, 2, { runId: o.runId });
  const { warnings, log } = warningLog();
  const coordinator = new Coordinator({ node: coordinatorNode!, store: o.store, dataDir: o.dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 1, ...(o.keepCheckpoints !== undefined ? { keepCheckpoints: o.keepCheckpoints } : {}) });
  t.after(() => coordinator.stop());
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: o.vocabSize ?? 64 });
  const state = createAverager(donor!, { prefix: STATE_PREFIX });
  t.after(() => state.stop());
  const params = initAlbertParams(config, 1);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 }).exportState();
  const { advertise } = await state.serveState({ epoch: () => 2, snapshot: () => ({ epoch: 2, data: encodeTrainingState({ epoch: 2, config, params, optimizer }) }) });
  await advertise();
  await publishProgress(donor!, { epoch: 2, samples: 8 });
  return { coordinator, warnings };
}
