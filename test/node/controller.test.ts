import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { createLogger } from '../../src/log/logger.js';
import { DEFAULT_SETTINGS, type AveragingMode, type SettingsPatch, type Snapshot } from '../../src/shared/api.js';
import { NodeController, type NodeControllerInit } from '../../src/node/controller.js';
import { METRIC } from '../../src/store/metric-series.js';
import type { AllreduceResult } from '../../src/averaging/index.js';
import type { TrainingEvent } from '../../src/training/events.js';
import { TrainingSink } from '../../src/training/sink.js';
import type { CoordinatorRole, TrainingService, TrainingSettings } from '../../src/training/service.js';
import { openStore, type Store } from '../../src/store/index.js';
import { startNode, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';
import { multiaddr } from '@multiformats/multiaddr';
import { encodeJoinCode } from '../../src/swarm/index.js';

const PEER = '12D3KooWDhgHNEpmtGWPq3nXBZLSxAMwHF82uXYFP7tG3m3c8iGK';
const ADDR = `/ip4/203.0.113.5/tcp/31337/p2p/${PEER}`;
const CODE = encodeJoinCode({ runId: 'run-a', bootstrap: [multiaddr(ADDR)] });
const OTHER_CODE = encodeJoinCode({ runId: 'run-b', bootstrap: [multiaddr(ADDR)] });

const log = createLogger({ logLevel: 'silent', logFormat: 'json' });

function controller(t: TestContext, store: Store, extra: Partial<NodeControllerInit> = {}): NodeController {
  const c = new NodeController({ store, log, version: '9.9.9', refreshMs: 60_000, ...extra });
  t.after(() => c.close());
  return c;
}

function storeIn(t: TestContext, dir = tmpDir(t)): Store {
  const store = openStore(dir);
  t.after(() => store.close());
  return store;
}

/** A training runtime that records what the controller asked of it. */
class FakeTraining implements TrainingService {
  readonly calls: string[] = [];
  readonly configured: TrainingSettings[] = [];
  configure(settings: TrainingSettings) {
    this.configured.push(settings);
  }
  private listener: ((e: TrainingEvent) => void) | undefined;
  async start() {
    this.calls.push('start');
  }
  async pause() {
    this.calls.push('pause');
  }
  subscribe(listener: (e: TrainingEvent) => void) {
    this.listener = listener;
    return () => (this.listener = undefined);
  }
  emit(e: TrainingEvent) {
    this.listener?.(e);
  }
}

test('start and pause move the contribution phase, persist across a restart, and say what is missing', async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  const c = new NodeController({ store, log, version: '9.9.9', refreshMs: 60_000 });
  assert.equal((await c.getSnapshot()).contribution.phase, 'stopped');
  assert.equal((await c.getSnapshot()).firstRunDone, false);
  const seen: Snapshot[] = [];
  c.subscribe((s) => seen.push(s));
  const started = await c.startContribution();
  assert.ok(started.ok);
  assert.equal(started.value.phase, 'running');
  assert.match(started.value.detail, /nothing is computed: training is off on this node/);
  assert.equal(seen.at(-1)?.contribution.phase, 'running', 'subscribers hear about the change');
  assert.equal(seen.at(-1)?.firstRunDone, true);
  assert.ok((await c.getLogs({})).some((l) => /contribution started/.test(l.msg)));
  const paused = await c.pauseContribution();
  assert.ok(paused.ok);
  assert.equal(paused.value.phase, 'paused');
  await c.close();
  store.close();

  const again = controller(t, storeIn(t, dir));
  const snap = await again.getSnapshot();
  assert.equal(snap.contribution.phase, 'paused', 'a volunteer pause survives a restart');
  assert.equal(snap.firstRunDone, true);
});

test('a policy hold makes a running node wait and never lifts a user pause', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  await c.startContribution();
  assert.deepEqual(training.calls, ['start']);
  c.setPolicyHold('on battery');
  let s = await c.getSnapshot();
  assert.equal(s.contribution.phase, 'waiting');
  assert.match(s.contribution.detail, /on battery/);
  assert.deepEqual(training.calls, ['start', 'pause']);
  c.setPolicyHold(undefined);
  assert.equal((await c.getSnapshot()).contribution.phase, 'running');
  assert.deepEqual(training.calls, ['start', 'pause', 'start']);
  await c.pauseContribution();
  c.setPolicyHold('on battery');
  c.setPolicyHold(undefined);
  s = await c.getSnapshot();
  assert.equal(s.contribution.phase, 'paused');
  assert.deepEqual(training.calls, ['start', 'pause', 'start', 'pause']);
});

test('the training runtime is configured with the volunteer\'s limits at start and on every relevant change', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  assert.equal(training.configured.length, 1);
  await c.updateSettings({ policies: { maxCpuThreads: 5 }, joinCode: CODE });
  assert.equal(training.configured.length, 2);
  assert.equal(training.configured[1]!.policies.maxCpuThreads, 5);
  assert.equal(training.configured[1]!.joinCode, CODE);
  await c.updateSettings({ startAtLogin: true });
  assert.equal(training.configured.length, 2, 'a desktop-only setting does not reconfigure training');
});

test('a node that was contributing resumes training by itself after a restart', async (t) => {
  const dir = tmpDir(t);
  const first = controller(t, storeIn(t, dir));
  await first.startContribution();
  await first.close();
  const training = new FakeTraining();
  const again = controller(t, storeIn(t, dir), { training });
  assert.equal((await again.getSnapshot()).contribution.phase, 'running');
  assert.deepEqual(training.calls, ['start']);
});

test('settings are validated, merged and persisted', async (t) => {
  const dir = tmpDir(t);
  const c = controller(t, storeIn(t, dir));
  const before = await c.getSettings();
  const r = await c.updateSettings({ policies: { maxCpuThreads: 6 }, displayName: 'ada' });
  assert.ok(r.ok);
  assert.equal(r.value.policies.maxCpuThreads, 6);
  assert.equal(r.value.policies.useGpu, before.policies.useGpu, 'other policies are kept');
  const bad = await c.updateSettings({ policies: { maxMemoryMiB: 12 } });
  assert.equal(bad.ok, false);
  assert.match(!bad.ok ? bad.error : '', /maxMemoryMiB|512/);
  assert.equal((await c.getSettings()).policies.maxMemoryMiB, before.policies.maxMemoryMiB, 'a rejected patch changes nothing');
  const reopened = controller(t, storeIn(t, dir));
  assert.equal((await reopened.getSettings()).policies.maxCpuThreads, 6);
  assert.equal((await reopened.getSettings()).displayName, 'ada');
});

test('settings stored before the precision setting existed load as fp32; fp16 is kept and reaches the training runtime', async (t) => {
  const store = storeIn(t);
  const { precision: _added, ...older } = DEFAULT_SETTINGS.policies;
  store.db.prepare("INSERT INTO settings (key, value) VALUES ('app.settings', ?)").run(JSON.stringify({ ...DEFAULT_SETTINGS, policies: { ...older, maxCpuThreads: 3 } }));
  const training = new FakeTraining();
  const c = controller(t, store, { training });
  const loaded = await c.getSettings();
  assert.equal(loaded.policies.precision, 'fp32');
  assert.equal(loaded.policies.maxCpuThreads, 3, 'the rest of the stored settings is kept, not reset');
  assert.ok((await c.updateSettings({ policies: { precision: 'fp16' } })).ok);
  assert.equal(training.configured.at(-1)!.policies.precision, 'fp16');
  const bad = await c.updateSettings({ policies: { precision: 'fp8' as 'fp16' } });
  assert.equal(bad.ok, false);
  assert.equal((await c.getSettings()).policies.precision, 'fp16');
});

test('my contribution, the swarm and the peers come from what the training side recorded', async (t) => {
  const store = storeIn(t);
  const now = Date.now();
  store.metrics.record([
    { series: METRIC.samples, value: 300, ts: now - 2000 },
    { series: METRIC.samples, value: 500, ts: now - 1000 },
    { series: METRIC.samples, value: 900, peer: 'peerA', ts: now },
    { series: METRIC.samples, value: 100, peer: 'peerB', ts: now },
    { series: METRIC.computeSeconds, value: 7200, ts: now },
    { series: METRIC.epoch, value: 12, ts: now },
    { series: METRIC.samplesAccumulated, value: 1024, ts: now },
    { series: METRIC.targetBatchSize, value: 4096, ts: now },
    { series: METRIC.loss, value: 3.5, ts: now - 5000, epoch: 11 },
    { series: METRIC.loss, value: 3.25, ts: now - 10, epoch: 12 },
  ]);
  store.peers.seen('peerA', [], { samplesPerSecond: 12.5, clientMode: true }, now - 1000);
  store.peers.seen('peerB', [], { samplesPerSecond: 'fast' }, now - 10 * 60_000);
  const s = await controller(t, store).getSnapshot();
  assert.equal(s.mine.samples, 500, 'the newest cumulative value, not a sum of points');
  assert.equal(s.mine.share, 500 / 1500);
  assert.equal(s.mine.rank, 2);
  assert.equal(s.mine.contributors, 3);
  assert.equal(s.mine.computeHours, 2);
  assert.equal(s.swarm.epoch, 12);
  assert.equal(s.swarm.lastLoss, 3.25);
  assert.equal(s.swarm.samplesAccumulated, 1024);
  assert.equal(s.swarm.peersAlive, null, 'unknown stays unknown');
  const a = s.peers.find((p) => p.peerId === 'peerA');
  const b = s.peers.find((p) => p.peerId === 'peerB');
  assert.deepEqual([a?.mode, a?.samplesPerSecond, a?.alive], ['client', 12.5, true]);
  assert.deepEqual([b?.mode, b?.samplesPerSecond, b?.alive], ['unknown', null, false], 'malformed peer info is ignored, not trusted');
  const loss = await controller(t, store).getSeries({ series: 'loss' });
  assert.deepEqual(loss.v, [3.5, 3.25]);
  assert.equal(loss.t[1], (now - 10) / 1000);
});

test('live training progress overrides older stored numbers', async (t) => {
  const store = storeIn(t);
  store.metrics.record([{ series: METRIC.epoch, value: 3, ts: Date.now() - 5000 }]);
  const training = new FakeTraining();
  const c = controller(t, store, { training });
  training.emit({ type: 'progress', at: Date.now(), samplesPerSecond: 2, swarm: { epoch: 4, peers: 3, samplesPerSecond: 6, samplesAccumulated: 10, targetBatchSize: 64, etaSeconds: 12 } });
  const s = await c.getSnapshot();
  assert.equal(s.swarm.epoch, 4);
  assert.equal(s.swarm.etaSeconds, 12);
  assert.equal(s.swarm.peersAlive, 3);
  training.emit({ type: 'stepped', at: Date.now(), epoch: 5, loss: 6.5, alone: false, contributed: { samples: 10, seconds: 1 } });
  const after = await c.getSnapshot();
  assert.deepEqual([after.swarm.epoch, after.swarm.lastLoss], [5, 6.5]);
});

test('the run data’s fetch progress and a refusal for other data reach the snapshot as their own fields; Start clears them', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  assert.deepEqual((await c.getSnapshot()).data, { fetch: null, mismatch: null });
  const progress = { datasetId: 'a'.repeat(64), bytes: 3 * 2 ** 20, totalBytes: 12 * 2 ** 20, shardsDone: 1, shardsTotal: 4, bytesPerSecond: 2 ** 20, etaSeconds: 9 };
  training.emit({ type: 'data-fetch', progress, at: 1000 });
  assert.deepEqual((await c.getSnapshot()).data.fetch, { ...progress, at: 1000 });
  training.emit({ type: 'data-mismatch', reason: 'no group formed: this peer trains on dataset aaa…, but 2 peers refused it', advice: 'restart with an empty data directory', at: 2000 });
  const s = await c.getSnapshot();
  assert.deepEqual(s.data.mismatch, { reason: 'no group formed: this peer trains on dataset aaa…, but 2 peers refused it', advice: 'restart with an empty data directory', at: 2000 });
  assert.equal(s.data.fetch?.bytes, progress.bytes, 'the fetch is kept beside the refusal');
  await c.startContribution();
  assert.deepEqual((await c.getSnapshot()).data, { fetch: null, mismatch: null }, 'a new Start fetches and matches again');
});

/** A gradient round's result as the averager reports it (a `mode` round), with what it cost the CPU. */
function averaged(busySeconds: number, bytes: number, at: number, more: Partial<AllreduceResult> = {}, mode: AveragingMode = 'plain'): TrainingEvent {
  const group = { id: 'g1', key: 'grad', schema: 'flat:4', compression: 'none', size: 4, chunkValues: 4, members: [], parts: [] } as const;
  const result: AllreduceResult = { status: 'complete', vector: new Float32Array(4), group, excluded: [], clamped: [], failedParts: [], bytesSent: 8, bytesReceived: 8, durationMs: 900, cpu: { busySeconds, processSeconds: 3 * busySeconds, bytes }, ...more };
  return { type: 'averaging', round: 'gradients', event: { type: 'averaged', result, mode }, at };
}

test("an all-reduce's main-thread busy time reaches the swarm panel: recorded by the sink, and live", async (t) => {
  const store = storeIn(t);
  const sink = new TrainingSink(store, log);
  sink.handle({ type: 'averaging', round: 'gradients', event: { type: 'group', groupId: 'g1', peers: 2, leader: PEER }, at: Date.now() - 3000 });
  assert.equal(store.metrics.latest(METRIC.averagingBusySeconds), undefined, 'only a finished round has a cost');
  sink.handle(averaged(0.75, 500e6, Date.now() - 2000));
  assert.equal(store.metrics.latest(METRIC.averagingBytes)?.value, 500e6);
  const stored = (await controller(t, store).getSnapshot()).swarm;
  assert.deepEqual([stored.averagingBusySeconds, stored.averagingBusySecondsPerGb], [0.75, 1.5]);
  const training = new FakeTraining();
  const c = controller(t, store, { training });
  training.emit(averaged(0.5, 250e6, Date.now()));
  const live = (await c.getSnapshot()).swarm;
  assert.deepEqual([live.averagingBusySeconds, live.averagingBusySecondsPerGb], [0.5, 2]);
});

test("each epoch's averaging reaches the swarm panel, recorded by the sink at the step: the run's mode, the bytes of every round of the epoch, their compression", async (t) => {
  const store = storeIn(t);
  const sink = new TrainingSink(store, log, 'powersgd');
  const stepped = (epoch: number, at: number, alone = false): TrainingEvent => ({ type: 'stepped', epoch, loss: 6, alone, contributed: { samples: 8 * epoch, seconds: epoch }, at });
  assert.equal((await controller(t, store).getSnapshot()).swarm.averagingMode, null, 'no step yet');
  const training = new FakeTraining();
  const c = controller(t, store, { training });
  // epoch 3: the PowerSGD round of a 4-value gradient (9.5× fewer values), then a plain state-averaging round of 4 values
  for (const e of [averaged(0.5, 16, Date.now() - 3000, { bytesSent: 0.3e6, powerSgd: { rank: 32, ratio: 9.5 } }, 'powersgd'), averaged(0.5, 16, Date.now() - 2500, { bytesSent: 2.7e6 }), stepped(3, Date.now() - 2000)]) {
    sink.handle(e);
    training.emit(e);
  }
  const figures = (s: Snapshot['swarm']) => [s.averagingEpoch, s.averagingMode, s.averagingBytesSent, s.averagingCompression];
  const epoch3 = [3, 'powersgd', 3e6, 8 / (4 / 9.5 + 4)];
  assert.deepEqual(figures((await c.getSnapshot()).swarm), epoch3, 'the run\'s mode and both rounds, not the last round alone');
  assert.deepEqual(figures((await controller(t, store).getSnapshot()).swarm), epoch3, 'recorded for a restarted dashboard');
  assert.deepEqual([store.metrics.latest(METRIC.averagingBytesSent)?.epoch, store.metrics.latest(METRIC.averagingCompression)?.epoch], [3, 3]);
  // epoch 4: its round failed (a local step): nothing averaged, and no compression carried over from epoch 3
  const epoch4 = stepped(4, Date.now() - 1000);
  sink.handle(epoch4);
  training.emit(epoch4);
  assert.deepEqual(figures((await c.getSnapshot()).swarm), [4, 'powersgd', 0, null]);
  // epoch 5: a PowerSGD round whose phase failed after this peer sent 0.2 MB: those bytes count, nothing was averaged
  const failed: TrainingEvent = { type: 'averaging', round: 'gradients', event: { type: 'failed', stage: 'allreduce', reason: 'PowerSGD phase P with 2 peers left 1 part(s) unaveraged', bytesSent: 0.2e6 }, at: Date.now() - 900 };
  for (const e of [failed, stepped(5, Date.now() - 800)]) {
    sink.handle(e);
    training.emit(e);
  }
  assert.deepEqual(figures((await c.getSnapshot()).swarm), [5, 'powersgd', 0.2e6, null]);
  // alone, a step is no epoch of a swarm: the figures stay
  const alone = stepped(6, Date.now(), true);
  sink.handle(alone);
  training.emit(alone);
  assert.deepEqual(figures((await c.getSnapshot()).swarm), [5, 'powersgd', 0.2e6, null]);
});

test('the coordinator toggle reports why it is unavailable, and shows the join code when the role exists', async (t) => {
  const without = controller(t, storeIn(t));
  const snap = await without.getSnapshot();
  assert.equal(snap.coordinator.available, false);
  const refused = await without.setCoordinator({ enabled: true });
  assert.equal(refused.ok, false);
  assert.match(!refused.ok ? refused.error : '', /coordinator mode needs the swarm, which is off on this node/);

  const calls: string[] = [];
  const role: CoordinatorRole = {
    start: async () => {
      calls.push('start');
      return { joinCode: 'cohort1-test-code', multiaddrs: ['/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWx'] };
    },
    stop: async () => void calls.push('stop'),
  };
  const c = controller(t, storeIn(t), { coordinator: role });
  const on = await c.setCoordinator({ enabled: true });
  assert.ok(on.ok && on.value.enabled);
  assert.equal(on.ok && on.value.enabled ? on.value.joinCode : '', 'cohort1-test-code');
  assert.deepEqual((await c.getSnapshot()).coordinator, on.ok ? on.value : undefined);
  const off = await c.setCoordinator({ enabled: false });
  assert.ok(off.ok && !off.value.enabled);
  assert.deepEqual(calls, ['start', 'stop']);
});

test('the snapshot carries this node\'s reachability as the swarm presence reports it, null while in no swarm', async (t) => {
  const store = storeIn(t);
  let reachability: 'public' | 'private' | 'unknown' | null = null;
  const c = controller(t, store, { swarm: { reachability: () => reachability, peerId: () => null, leaderboard: () => null, connectedPeers: () => [], notices: () => [] } });
  assert.equal((await c.getSnapshot()).swarm.reachability, null);
  reachability = 'unknown';
  c.refresh();
  assert.equal((await c.getSnapshot()).swarm.reachability, 'unknown');
  reachability = 'public';
  c.refresh();
  assert.equal((await c.getSnapshot()).swarm.reachability, 'public');
  assert.equal((await controller(t, store).getSnapshot()).swarm.reachability, null, 'a node without a swarm part is in no swarm');
});

test('a peer of another Cohort release reaches the dashboard as one notice saying what to do, however often it connects', async (t) => {
  // two real nodes: b serves a protocol of the run in another version than a (as a newer release's state/3.0.0)
  const [a, b] = await Promise.all([startNode(t, { runId: 'notices' }), startNode(t, { runId: 'notices' })]);
  await a.handle('probe/1.0.0', (stream) => void stream.close());
  await b.handle('probe/2.0.0', (stream) => void stream.close());
  const c = controller(t, storeIn(t), { swarm: { reachability: () => a.reachability, peerId: () => a.peerId.toString(), leaderboard: () => null, connectedPeers: () => [], notices: () => a.notices.shown() } });
  assert.deepEqual((await c.getSnapshot()).notices, [], 'nothing to tell before the peer is met');
  for (let connection = 1; connection <= 2; connection++) {
    await b.libp2p.dial(a.libp2p.getMultiaddrs()[0]!);
    await waitFor(`a to identify b on connection ${connection}`, () => a.notices.shown().length > 0);
    await b.libp2p.hangUp(a.peerId);
  }
  c.refresh();
  const { notices } = await c.getSnapshot();
  assert.deepEqual(notices.map((n) => n.kind), ['other-release']);
  assert.match(notices[0]!.text, /another Cohort release.*update it/);
});

test('a join code is decoded before it is stored: its swarm is described, a bad one is refused with the reason', async (t) => {
  const c = controller(t, storeIn(t));
  assert.deepEqual(await c.describeJoinCode({ code: `  ${CODE} ` }), { ok: true, value: { runId: 'run-a', peers: [ADDR], closed: false } });
  const truncated = await c.describeJoinCode({ code: CODE.slice(0, -4) });
  assert.deepEqual(truncated, { ok: false, error: 'join code checksum does not match: it was truncated or mistyped' });
  assert.match(((await c.describeJoinCode({ code: 'abc' })) as { error: string }).error, /^join code must start with "cohort:"/);
  assert.match(((await c.describeJoinCode({ code: '' })) as { error: string }).error, /no join code: paste the code a coordinator gave you/);
  const bad = await c.updateSettings({ joinCode: 'cohort:AAAA' });
  assert.equal(bad.ok, false);
  assert.match(!bad.ok ? bad.error : '', /^settings rejected: join code is too short; was it copied whole\?/);
  assert.equal((await c.getSettings()).joinCode, '', 'nothing stored');
  assert.ok((await c.updateSettings({ joinCode: CODE })).ok);
  assert.ok((await c.updateSettings({ joinCode: '' })).ok, 'an empty code is allowed: the default run, or alone');
});

test('the coordinator switch turned on while Start trains alone moves training into the run it coordinates; training with a swarm stays', async (t) => {
  const role: CoordinatorRole = { start: async () => ({ joinCode: CODE, multiaddrs: [] }), stop: async () => undefined };
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training, coordinator: role });
  await c.startContribution();
  training.emit({ type: 'alone', reason: 'no join code set', at: 1000 });
  await c.setCoordinator({ enabled: true });
  for (let i = 0; i < 100 && training.calls.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(training.calls, ['start', 'pause', 'start'], 'restarted: Start now trains in the run');
  assert.doesNotMatch((await c.getSnapshot()).contribution.detail, /alone/);
  // off and on again while training in the run: nothing to move
  await c.setCoordinator({ enabled: false });
  await c.setCoordinator({ enabled: true });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(training.calls.length, 3, 'no restart');
});

test('changing the join code while contributing restarts training on the new swarm; while paused it only reconfigures', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  await c.startContribution();
  assert.deepEqual(training.calls, ['start']);
  await c.updateSettings({ joinCode: CODE });
  for (let i = 0; i < 100 && training.calls.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(training.calls, ['start', 'pause', 'start'], 'paused, then started on the new swarm');
  assert.equal(training.configured.at(-1)!.joinCode, CODE, 'configured with the new code before the start');
  await c.updateSettings({ displayName: 'ada', policies: { onlyWhenIdle: true, keepAwake: false } });
  assert.equal(training.calls.length, 3, 'other settings do not restart');
  await c.pauseContribution();
  await c.updateSettings({ joinCode: OTHER_CODE, policies: { maxCpuThreads: 1 } });
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(training.calls, ['start', 'pause', 'start', 'pause'], 'paused: no restart');
});

test('changing what training reads as it starts (CPU threads, GPU, memory, bandwidth, precision) while contributing restarts it with the new value', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  await c.startContribution();
  const restarts = async (patch: SettingsPatch, n: number): Promise<void> => {
    assert.ok((await c.updateSettings(patch)).ok);
    for (let i = 0; i < 100 && training.calls.length < 1 + 2 * n; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(training.calls.length, 1 + 2 * n, `${JSON.stringify(patch)}: ${training.calls.join(' ')}`);
  };
  await restarts({ policies: { maxCpuThreads: 1 } }, 1);
  assert.equal(training.configured.at(-1)!.policies.maxCpuThreads, 1, 'configured with the new value before the start');
  await restarts({ policies: { useGpu: false } }, 2);
  await restarts({ policies: { maxMemoryMiB: 2048 } }, 3);
  await restarts({ policies: { bandwidthCapKiBps: 512 } }, 4);
  await restarts({ policies: { precision: 'fp16' } }, 5);
  await restarts({ policies: { precision: 'fp16' } }, 5);
  assert.deepEqual(training.calls.slice(-2), ['pause', 'start']);
});

test('the snapshot names the default run and the About facts', async (t) => {
  const dir = tmpDir(t);
  const none = controller(t, storeIn(t, dir));
  const s = await none.getSnapshot();
  assert.equal(s.defaultSwarm, null);
  assert.deepEqual(s.about, { version: '9.9.9', licence: 'Apache-2.0', dataDir: dir, logDir: null });
  await none.close();
  const swarm = { runId: 'public-run', peers: [ADDR], closed: false };
  const withDefault = controller(t, storeIn(t, dir), { defaultSwarm: swarm, logDir: `${dir}/logs`, licence: 'MIT' });
  const s2 = await withDefault.getSnapshot();
  assert.deepEqual(s2.defaultSwarm, swarm);
  assert.deepEqual(s2.about, { version: '9.9.9', licence: 'MIT', dataDir: dir, logDir: `${dir}/logs` });
});

test('training that stops by itself shows as halted (memory) or error, not as a pause by the volunteer, across a restart too; Start clears it', async (t) => {
  const dir = tmpDir(t);
  const training = new FakeTraining();
  const c = controller(t, storeIn(t, dir), { training });
  await c.startContribution();
  training.emit({ type: 'halted', cause: 'memory', reason: 'memory use 8.0 GiB stayed over the 4.0 GiB limit', at: Date.now() });
  assert.deepEqual({ ...(await c.getSnapshot()).contribution, since: 0 }, { phase: 'halted', detail: 'halted: memory limit — memory use 8.0 GiB stayed over the 4.0 GiB limit', since: 0 });
  await c.close();
  const again = controller(t, storeIn(t, dir), { training: new FakeTraining() });
  assert.equal((await again.getSnapshot()).contribution.phase, 'halted', 'still says why after a restart');
  await again.startContribution();
  assert.equal((await again.getSnapshot()).contribution.phase, 'running');
  const t2 = new FakeTraining();
  await again.close();
  const third = controller(t, storeIn(t, dir), { training: t2 });
  t2.emit({ type: 'halted', cause: 'error', reason: 'collaborative training stopped: ENOSPC', at: Date.now() });
  assert.equal((await third.getSnapshot()).contribution.detail, 'error: collaborative training stopped: ENOSPC');
  await third.pauseContribution();
  assert.equal((await third.getSnapshot()).contribution.detail, 'paused by you: stays paused until you resume');
});

test('a Start that trains alone says so in the state, with the reason, instead of a bare "contributing"; the next Start decides again', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  await c.startContribution();
  assert.equal((await c.getSnapshot()).contribution.detail, 'contributing');
  training.emit({ type: 'alone', reason: "could not reach any peer of the join code's swarm: /ip4/127.0.0.1/tcp/1/p2p/12D3KooW…: ECONNREFUSED", at: Date.now() });
  const s = await c.getSnapshot();
  assert.equal(s.contribution.phase, 'running');
  assert.equal(s.contribution.detail, "training on this machine alone: could not reach any peer of the join code's swarm: /ip4/127.0.0.1/tcp/1/p2p/12D3KooW…: ECONNREFUSED");
  await c.pauseContribution();
  assert.equal((await c.getSnapshot()).contribution.phase, 'paused');
  await c.startContribution();
  assert.equal((await c.getSnapshot()).contribution.detail, 'contributing', 'this Start has not said it trains alone');
});

test('a Start that trains alone and later reaches its swarm (a retry) drops "training on this machine alone" from the state', async (t) => {
  const training = new FakeTraining();
  const c = controller(t, storeIn(t), { training });
  await c.startContribution();
  training.emit({ type: 'alone', reason: "could not reach any peer of the join code's swarm: ECONNREFUSED (Cohort tries the swarm again from time to time)", at: Date.now() });
  assert.match((await c.getSnapshot()).contribution.detail, /^training on this machine alone: /);
  training.emit({ type: 'joined', runId: 'back-run', at: Date.now() });
  const s = await c.getSnapshot();
  assert.equal(s.contribution.phase, 'running');
  assert.equal(s.contribution.detail, 'contributing');
});
