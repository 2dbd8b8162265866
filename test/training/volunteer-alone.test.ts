// Start with the join code of a swarm whose peers are all gone: the node trains on this machine alone
// and tells the dashboard why (the controller turns it into the state's detail).
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { createLogger } from '../../src/log/logger.js';
import { DEFAULT_SETTINGS } from '../../src/shared/settings-schema.js';
import { openStore } from '../../src/store/index.js';
import type { TrainingEvent } from '../../src/training/events.js';
import { SharedSwarm, VolunteerTraining } from '../../src/training/volunteer.js';
import { preparedDataDirs } from '../collab/processes.js';
import { startNode } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const LISTEN = ['/ip4/127.0.0.1/tcp/0'];

test('Start with the join code of a swarm that is gone trains alone and says why', { timeout: 90_000 }, async (t) => {
  const gone = await startNode(t, { runId: 'gone-run' });
  const code = gone.joinCode();
  await gone.stop();
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['node']);
  const store = openStore(dir!);
  const options = { store, log, dataDir: dir!, listen: LISTEN };
  const runtime = new VolunteerTraining(options, new SharedSwarm(options));
  t.after(() => runtime.pause().finally(() => store.close()));
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: code, displayName: '' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  const alone = events.filter((e) => e.type === 'alone');
  assert.equal(alone.length, 1);
  assert.match(alone[0]!.type === 'alone' ? alone[0]!.reason : '', /^could not reach any peer of the join code's swarm: \/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/\S+: .*ECONNREFUSED/);
});
