// The app's node for tests (as volunteerParts makes it): one swarm node shared by Start and the
// coordinator switch, in-process on loopback.
import path from 'node:path';
import type test from 'node:test';
import { createLogger } from '../../src/log/logger.js';
import { DEFAULT_SETTINGS } from '../../src/shared/settings-schema.js';
import { openStore } from '../../src/store/index.js';
import type { TrainingEvent } from '../../src/training/events.js';
import { SharedSwarm, SwarmCoordinatorRole, VolunteerTraining, type VolunteerOptions } from '../../src/training/volunteer.js';
import { preparedDataDirs } from '../collab/processes.js';
import { tmpDir } from '../helpers/tmp.js';

export const quiet = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const LISTEN = ['/ip4/127.0.0.1/tcp/0'];
export const POLICIES = { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1, useGpu: false };

/** A node as the app makes it (volunteerParts): one swarm node shared by Start and the coordinator switch. */
export function appNode(t: test.TestContext, dir: string, log: VolunteerOptions['log'], joinCode: string) {
  const store = openStore(dir);
  const options: VolunteerOptions = { store, log, dataDir: dir, runId: 'founded-in-app', run: { targetBatchSize: 16 }, batchSize: 8, optimizer: { matchmakingTime: 1 }, listen: LISTEN };
  const swarm = new SharedSwarm(options);
  const training = new VolunteerTraining(options, swarm);
  const role = new SwarmCoordinatorRole(options, swarm, () => training.target);
  training.configure({ policies: POLICIES, joinCode, displayName: '' });
  const events: TrainingEvent[] = [];
  training.subscribe((e) => events.push(e));
  let closed: Promise<void> | undefined;
  // before the test's folders go (after hooks run in order: they were registered first)
  const close = (): Promise<void> => (closed ??= Promise.all([training.pause(), role.stop()]).then(() => store.close()));
  t.after(close);
  return { store, swarm, training, role, events, close };
}

/** A founder's app node (no join code) on a fresh prepared data directory. */
export async function founderNode(t: test.TestContext, log: VolunteerOptions['log'] = quiet) {
  const [dir] = await preparedDataDirs(path.join(tmpDir(t), 'template'), ['founder']);
  return { dir: dir!, ...appNode(t, dir!, log, '') };
}

