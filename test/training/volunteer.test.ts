// The node's plug-in: Start with a join code trains with the swarm (a coordinator process on
// loopback); the coordinator switch starts a coordinator on the node's own swarm node.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { storedRunRecord } from '../../src/collab/full-state.js';
import { newRunParams, publishRunParams, RUN_KEY, runParamsRecords } from '../../src/collab/run-params.js';
import { DEFAULT_RUN_SETTINGS } from '../../src/collab/run-settings.js';
import { prepareDataset } from '../../src/data/prepare.js';
import { fetchDataset } from '../../src/shards/index.js';
import { SharedSwarm, SwarmCoordinatorRole, VolunteerTraining } from '../../src/training/volunteer.js';
import { createLogger } from '../../src/log/logger.js';
import { METRIC } from '../../src/store/metric-series.js';
import { StoreView } from '../../src/node/store-view.js';
import type { TrainingEvent } from '../../src/training/events.js';
import { DEFAULT_SETTINGS } from '../../src/shared/settings-schema.js';
import { openStore } from '../../src/store/index.js';
import { startNode, waitFor as waitUntil } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from '../collab/processes.js';

const log = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const LISTEN = ['/ip4/127.0.0.1/tcp/0'];

test('Start with a join code trains with the swarm; the coordinator switch serves a join code; Pause stops', { timeout: 210_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir, other] = await preparedDataDirs(path.join(root, 'template'), ['node', 'other']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'runtime-test', '--data-dir', path.join(root, 'co'), '--listen', LISTEN[0]!, '--refresh', '1', '--target-batch-size', '16']);
  const [, coId] = await waitFor(co, /Visible multiaddr: \S+\/p2p\/(\S+)/, 30_000);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peer = spawnCli(t, ['run', '--join', code!, '--data-dir', other!, '--listen', LISTEN[0]!, '--target-batch-size', '16', '--matchmaking-time', '1', '--threads', '1', '--max-epochs', '40']);
  const [, peerId] = await waitFor(peer, /Visible multiaddr: \S+\/p2p\/(\S+)/, 30_000);

  const store = openStore(dir!);
  let rss = 0; // what the memory watchdog reads: nothing, until the end
  const options = { store, log, dataDir: dir!, run: { targetBatchSize: 16 }, optimizer: { matchmakingTime: 1 }, listen: LISTEN, memoryProbe: { rssBytes: () => rss }, watchdogIntervalMs: 20 };
  const swarm = new SharedSwarm(options);
  const runtime = new VolunteerTraining(options, swarm);
  const role = new SwarmCoordinatorRole(options, swarm, () => runtime.target);
  t.after(() => Promise.all([runtime.pause(), role.stop()]));
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: code!, displayName: 'volunteer' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  const deadline = Date.now() + 60_000;
  const seen = (): boolean => events.some((e) => e.type === 'stepped' && e.epoch >= 2) && events.some((e) => e.type === 'progress' && e.swarm.peers >= 2);
  while (!seen() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  const stepped = events.filter((e): e is Extract<TrainingEvent, { type: 'stepped' }> => e.type === 'stepped');
  assert.ok(stepped.some((e) => e.epoch >= 2 && !e.alone), `no swarm step reached: ${JSON.stringify(events.slice(-3))}`);
  assert.ok(events.some((e) => e.type === 'progress' && e.swarm.peers >= 2), 'never saw the other peer');
  // the dashboard's accumulated samples are those the peers reported (whole samples), not the other peer's report extrapolated with its throughput
  const accumulated = events.flatMap((e) => (e.type === 'progress' ? [e.swarm.samplesAccumulated] : []));
  assert.ok(accumulated.every(Number.isInteger), `samples accumulated: ${accumulated.join(' ')}`);
  // the peers table: the training peer with the throughput its progress records give (its first says 0:
  // nothing measured yet), the coordinator (no progress) alive while connected
  const view = new StoreView(store);
  let rows = view.peers(Date.now(), swarm.connectedPeers());
  const row = (id: string | undefined) => rows.find((r) => r.peerId === id);
  for (const stop = Date.now() + 60_000; !((row(peerId)?.samplesPerSecond ?? 0) > 0) && Date.now() < stop; await new Promise((r) => setTimeout(r, 200))) rows = view.peers(Date.now(), swarm.connectedPeers());
  assert.ok((row(peerId)?.samplesPerSecond ?? 0) > 0, `the training peer's samples/s: ${JSON.stringify(rows)}`);
  assert.equal(row(coId)?.alive, true, `the connected coordinator is alive: ${JSON.stringify(rows)}`);
  // Pause saves the peer's state with the swarm's run record (so a restart resumes it only in the same run); Start goes on
  await runtime.pause();
  const record = storedRunRecord(store, 'runtime-test');
  assert.equal(record?.targetBatchSize, 16, 'the saved state keeps the run record');
  await runtime.start();

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

test('Start without a join code trains alone', { timeout: 90_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['node']);
  const store = openStore(dir!);
  const options = { store, log, dataDir: dir! };
  const runtime = new VolunteerTraining(options, new SharedSwarm(options));
  t.after(() => runtime.pause());
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: '', displayName: '' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  const deadline = Date.now() + 60_000;
  while (!events.some((e) => e.type === 'stepped') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  await runtime.pause();
  const local = events.filter((e): e is Extract<TrainingEvent, { type: 'stepped' }> => e.type === 'stepped');
  assert.ok(local.length > 0, 'no local step');
  assert.ok(local.every((e) => e.alone), 'solo steps say they were taken alone');
  assert.deepEqual(events.filter((e) => e.type === 'alone').map((e) => e.type === 'alone' && e.reason), ['no join code set'], 'the dashboard is told why it trains alone');
  assert.ok(events.every((e) => e.type !== 'progress' || e.swarm.peers === 1), 'solo training reports itself as the only peer');
  store.close();
});

test('joining, the runtime and the coordinator switch adopt the swarm’s published target batch size instead of their own', { timeout: 150_000 }, async (t) => {
  const founder = await startNode(t, { runId: 'runtime-params' });
  await waitUntil('the founder to serve the DHT', () => !founder.clientMode);
  // in the background: a lone node's first lookup only ends at its timeout (it holds its entry at once)
  const published = publishRunParams(founder, newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: 24 }, null));
  const code = founder.joinCode();

  const dir = tmpDir(t);
  const store = openStore(dir);
  const options = { store, log, dataDir: dir, optimizer: { matchmakingTime: 1 }, listen: LISTEN };
  const runtime = new VolunteerTraining(options, new SharedSwarm(options));
  // the coordinator switch of another node (its own store, so its metrics are its own)
  const coDir = tmpDir(t);
  const coStore = openStore(coDir);
  const coOptions = { store: coStore, log, dataDir: coDir, listen: LISTEN, run: { targetBatchSize: 512 } };
  const role = new SwarmCoordinatorRole(coOptions, new SharedSwarm(coOptions), () => ({ initialPeers: [code] }));
  t.after(async () => {
    await Promise.all([runtime.pause(), role.stop()]);
    store.close();
    coStore.close();
  });
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: code, displayName: '' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await Promise.all([runtime.start(), role.start()]);
  const targets = (): number[] => events.flatMap((e) => (e.type === 'progress' ? [e.swarm.targetBatchSize] : []));
  const coordinatorTargets = (): number[] => (coStore.db.prepare('SELECT value FROM metrics WHERE series = ?').all(METRIC.targetBatchSize) as Array<{ value: number }>).map((r) => r.value);
  await waitUntil('the runtime’s progress and a coordinator poll', () => targets().length > 0 && coordinatorTargets().length > 0, 60_000);
  // both joiners keep the founder's parameters published under their own signatures (while their nodes run)
  await waitUntil('the joiners to re-publish the run record', async () => {
    const entries = [...(await runParamsRecords(founder).get(RUN_KEY)).values()];
    return entries.filter((e) => e.owner !== founder.peerId.toString() && e.value.targetBatchSize === 24).length >= 2;
  }, 60_000);
  await runtime.pause();
  assert.deepEqual([...new Set(targets())], [24], 'the runtime trains towards the swarm’s target, not its default');
  assert.deepEqual([...new Set(coordinatorTargets())], [24], 'the coordinator measures against the swarm’s target, not its own 512');
  assert.ok((await published).replicas >= 1);
});

test('the coordinator switch founding a run on the data it holds serves that data: a newcomer fetches it by join code', { timeout: 90_000 }, async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  const info = (await prepareDataset({ store, dataDir: dir, source: 'bundled', maxDocuments: 4, vocabSize: 1500, shardExamples: 50 })).info;
  const options = { store, log, dataDir: dir, listen: LISTEN, runId: 'switch-data' };
  const role = new SwarmCoordinatorRole(options, new SharedSwarm(options), () => undefined);
  t.after(async () => {
    await role.stop();
    store.close();
  });
  const { joinCode } = await role.start();

  const newcomerDir = tmpDir(t);
  const newcomerStore = openStore(newcomerDir);
  t.after(() => newcomerStore.close());
  const newcomer = await startNode(t, { initialPeers: joinCode });
  await newcomer.ready;
  const r = await fetchDataset(newcomer, newcomerStore, { datasetId: info.datasetId!, dataDir: newcomerDir, log, waitForHolderMs: 30_000 });
  assert.deepEqual([r.info.datasetId, r.info.tokenizerHash, r.fetched], [info.datasetId, info.tokenizerHash, info.shardCount]);
  // the switch's record pins that data
  const entries = [...(await runParamsRecords(newcomer).get(RUN_KEY)).values()];
  assert.deepEqual(entries.map((e) => e.value.data), [{ datasetId: info.datasetId, tokenizerSha256: info.tokenizerHash }]);
});
