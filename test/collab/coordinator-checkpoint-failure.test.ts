// A coordinator whose checkpoint keeps failing the same way (the peers left, nobody serves the state)
// says so once as a warning, not at every look: real swarm nodes on loopback, the coordinator polled
// in-process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Coordinator } from '../../src/collab/coordinator.js';
import { openStore } from '../../src/store/index.js';
import { warningLog } from '../helpers/log.js';
import { publishProgress } from '../helpers/progress.js';
import { startSwarm } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

test('the same checkpoint failure at every look is warned about once', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const [coordinatorNode, peer] = await startSwarm(t, 2, { runId: 'checkpoint-failure' });
  const { warnings, log } = warningLog();
  const coordinator = new Coordinator({ node: coordinatorNode!, store, dataDir, log, targetBatchSize: 80, refresh: 60, checkpointEvery: 1 });
  t.after(() => coordinator.stop());
  // a peer at epoch 2 that serves no state: every checkpoint attempt fails alike
  await publishProgress(peer!, { epoch: 2, samples: 8 });
  for (let look = 0; look < 3; look++) await coordinator.poll();
  const failures = warnings.filter((w) => w.startsWith('checkpoint at epoch 2 failed'));
  assert.equal(failures.length, 1, warnings.join('\n'));
  assert.match(failures[0]!, /no peer advertises state/);
});
