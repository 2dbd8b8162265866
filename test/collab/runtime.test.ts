// The node's plug-in: Start with a join code trains with the swarm (a coordinator process on
// loopback); the coordinator switch starts a coordinator on the node's own swarm node.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { CollaborativeCoordinatorRole, CollaborativeRuntime, SharedSwarm } from '../../src/collab/runtime.js';
import { createLogger } from '../../src/log/logger.js';
import { METRIC } from '../../src/node/metric-series.js';
import type { TrainingEvent } from '../../src/node/runtime-parts.js';
import { DEFAULT_SETTINGS } from '../../src/shared/settings-schema.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const log = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const LISTEN = ['/ip4/127.0.0.1/tcp/0'];

test('Start with a join code trains with the swarm; the coordinator switch serves a join code; Pause stops', { timeout: 120_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir, other] = await preparedDataDirs(path.join(root, 'template'), ['node', 'other']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'runtime-test', '--data-dir', path.join(root, 'co'), '--listen', LISTEN[0]!, '--refresh', '1', '--target-batch-size', '16']);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peer = spawnCli(t, ['run', '--join', code!, '--data-dir', other!, '--listen', LISTEN[0]!, '--target-batch-size', '16', '--matchmaking-time', '1', '--threads', '1', '--max-epochs', '6']);
  await waitFor(peer, /Visible multiaddr/, 30_000);

  const store = openStore(dir!);
  let rss = 0; // what the memory watchdog reads: nothing, until the end
  const options = { store, log, dataDir: dir!, targetBatchSize: 16, matchmakingTime: 1, listen: LISTEN, memoryProbe: { rssBytes: () => rss }, watchdogIntervalMs: 20 };
  const swarm = new SharedSwarm(options);
  const runtime = new CollaborativeRuntime(options, swarm);
  const role = new CollaborativeCoordinatorRole(options, swarm, () => runtime.joinCode);
  t.after(() => Promise.all([runtime.pause(), role.stop()]));
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: code!, displayName: 'volunteer' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  const deadline = Date.now() + 60_000;
  const seen = (): boolean => events.some((e) => e.type === 'progress' && e.swarm.lastLoss !== undefined && (e.swarm.epoch ?? 0) >= 2) && events.some((e) => e.type === 'progress' && (e.swarm.peersAlive ?? 0) >= 2);
  while (!seen() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  const stepped = events.filter((e): e is Extract<TrainingEvent, { type: 'progress' }> => e.type === 'progress' && e.swarm.lastLoss !== undefined);
  assert.ok(stepped.some((e) => (e.swarm.epoch ?? 0) >= 2), `no swarm step reached: ${JSON.stringify(events.slice(-3))}`);
  assert.ok(events.some((e) => e.type === 'progress' && (e.swarm.peersAlive ?? 0) >= 2), 'never saw the other peer');

  const coordinator = await role.start();
  assert.match(coordinator.joinCode, /^cohort:/);
  assert.ok(coordinator.multiaddrs.some((a) => a.startsWith('/ip4/127.0.0.1/tcp/')));
  await role.stop();

  // the process stays over the volunteer's memory limit: the watchdog stops the swarm peer, which says why
  rss = 8 * 2 ** 30;
  const halted = async (): Promise<Extract<TrainingEvent, { type: 'halted' }> | undefined> => {
    for (const stop = Date.now() + 30_000; Date.now() < stop; await new Promise((r) => setTimeout(r, 100))) {
      const e = events.find((x): x is Extract<TrainingEvent, { type: 'halted' }> => x.type === 'halted');
      if (e) return e;
    }
    return undefined;
  };
  assert.match((await halted())?.reason ?? 'no halted event', /^memory use 8\.0 GiB stayed over the 4\.0 GiB limit/);

  await runtime.pause();
  const losses = store.db.prepare("SELECT COUNT(*) AS n FROM metrics WHERE series = ? AND peer = ''").get(METRIC.loss) as { n: number };
  assert.ok(losses.n >= 2);
  store.close();
  await peer.exited;
  co.child.kill('SIGTERM');
  await co.exited;
});

test('Start without a join code trains alone with the local runtime', { timeout: 90_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['node']);
  const store = openStore(dir!);
  const options = { store, log, dataDir: dir! };
  const runtime = new CollaborativeRuntime(options, new SharedSwarm(options));
  t.after(() => runtime.pause());
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: '', displayName: '' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  const deadline = Date.now() + 60_000;
  while (!events.some((e) => e.type === 'progress' && e.swarm.lastLoss !== undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  await runtime.pause();
  const local = events.filter((e): e is Extract<TrainingEvent, { type: 'progress' }> => e.type === 'progress' && e.swarm.lastLoss !== undefined);
  assert.ok(local.length > 0, 'no local step');
  assert.ok(local.every((e) => e.swarm.peersAlive === 1), 'the local runtime reports itself as the only peer');
  store.close();
});
