import assert from 'node:assert/strict';
import { test } from 'node:test';
import { statusLine, stopNotice, trayModel } from '../../src/main/tray-model.js';
import type { ContributionPhase, Snapshot } from '../../src/shared/api.js';

function snapshot(phase: ContributionPhase, detail = '', samplesPerSecond: number | null = null, epoch: number | null = null): Snapshot {
  return {
    version: '0',
    contribution: { phase, detail, since: 0 },
    mine: { samples: 0, computeHours: 0, share: null, rank: null, contributors: 0, samplesPerSecond, leaderboard: null },
    swarm: { peersAlive: null, samplesPerSecond: null, epoch, samplesAccumulated: null, targetBatchSize: null, etaSeconds: null, lastLoss: null, averagingBusySeconds: null, averagingBusySecondsPerGb: null, averagingEpoch: null, averagingMode: null, averagingBytesSent: null, averagingCompression: null, updatedAt: null, reachability: null },
    coordinator: { available: false, enabled: false, reason: 'x' },
    peers: [],
    lastLogSeq: 0,
    data: { fetch: null, mismatch: null },
    notices: [],
    firstRunDone: true,
    defaultSwarm: null,
    about: { version: '0', licence: 'Apache-2.0', dataDir: '/data', logDir: '/data/logs' },
  };
}

const toggleLabel = (s: Snapshot | undefined) => trayModel(s).items.flatMap((i) => (i.kind === 'action' && i.action === 'toggle' ? [i.label] : []))[0];

test('the tray menu offers Start when not contributing and Pause when contributing or waiting', () => {
  assert.equal(toggleLabel(undefined), 'Start contributing');
  assert.equal(toggleLabel(snapshot('stopped')), 'Start contributing');
  assert.equal(toggleLabel(snapshot('paused')), 'Start contributing');
  assert.equal(toggleLabel(snapshot('running')), 'Pause contributing');
  assert.equal(toggleLabel(snapshot('waiting', 'waiting: on battery')), 'Pause contributing');
  const actions = (s: Snapshot) => trayModel(s).items.flatMap((i) => (i.kind === 'action' ? [i.action] : []));
  assert.deepEqual(actions(snapshot('running')), ['toggle', { snooze: 15 }, { snooze: 60 }, 'open', 'logs', 'quit']);
  assert.deepEqual(actions(snapshot('paused')), ['toggle', 'open', 'logs', 'quit'], 'snooze is offered only while running');
});

test('the status line shows samples/s and epoch while running, and why it waits', () => {
  assert.equal(statusLine(snapshot('running', 'contributing', 12.345, 42)), 'Contributing · 12.3 samples/s · epoch 42');
  assert.equal(statusLine(snapshot('running', 'contributing')), 'Contributing');
  const alone = trayModel(snapshot('running', 'training on this machine alone: no join code set', 3.21, 2));
  assert.equal(alone.tooltip, 'Cohort — Training on this machine alone: no join code set · 3.2 samples/s · epoch 2', 'running without a swarm says so, and why, as the header does');
  assert.equal(alone.icon, 'active');
  assert.deepEqual(alone.items[0], { kind: 'status', label: 'Training on this machine alone: no join code set · 3.2 samples/s · epoch 2' });
  assert.equal(statusLine(snapshot('waiting', 'waiting: the computer runs on battery')), 'Waiting: the computer runs on battery');
  assert.equal(statusLine(snapshot('paused')), 'Paused by you');
  const m = trayModel(snapshot('waiting', 'waiting: the computer is in use'));
  assert.equal(m.icon, 'paused');
  assert.match(m.tooltip, /in use/, 'the tooltip says why it is not running');
  assert.equal(trayModel(snapshot('running')).icon, 'active');
  assert.deepEqual(m.items[0], { kind: 'status', label: 'Waiting: the computer is in use' });
});

test('each way contribution stops maps to its own tray line, and only a stop by itself notifies', () => {
  const lines = {
    paused: statusLine(snapshot('paused', 'paused by you: stays paused until you resume')),
    battery: statusLine(snapshot('waiting', 'waiting: the computer runs on battery (resumes on mains power)')),
    inUse: statusLine(snapshot('waiting', 'waiting: the computer is in use (runs after 5 min without input)')),
    schedule: statusLine(snapshot('waiting', 'waiting: outside the schedule (computes from 22:00 to 07:00)')),
    memory: statusLine(snapshot('halted', 'halted: memory limit — memory use 8.0 GiB stayed over the 4.0 GiB limit')),
    error: statusLine(snapshot('error', 'error: local training stopped: disk full')),
  };
  assert.deepEqual(lines, {
    paused: 'Paused by you',
    battery: 'Waiting: the computer runs on battery (resumes on mains power)',
    inUse: 'Waiting: the computer is in use (runs after 5 min without input)',
    schedule: 'Waiting: outside the schedule (computes from 22:00 to 07:00)',
    memory: 'Halted: memory limit — memory use 8.0 GiB stayed over the 4.0 GiB limit',
    error: 'Error: local training stopped: disk full',
  });
  for (const phase of ['halted', 'error'] as const) {
    const m = trayModel(snapshot(phase, `${phase}: x`));
    assert.equal(m.icon, 'paused');
    assert.equal(toggleLabel(snapshot(phase)), 'Start contributing', `${phase}: Start resumes`);
  }

  const running = snapshot('running', 'contributing');
  const memory = stopNotice(running, snapshot('halted', 'halted: memory limit — memory use 8.0 GiB stayed over the 4.0 GiB limit'));
  assert.equal(memory?.title, 'Cohort stopped: memory limit');
  assert.match(memory?.body ?? '', /^memory use 8\.0 GiB stayed over the 4\.0 GiB limit\. Raise the memory limit in Settings/);
  const error = stopNotice(snapshot('waiting', 'waiting: x'), snapshot('error', 'error: local training stopped: disk full'));
  assert.equal(error?.title, 'Cohort stopped on an error');
  assert.match(error?.body ?? '', /^local training stopped: disk full\. The log has the details/);
  assert.equal(stopNotice(running, snapshot('paused')), undefined, 'a pause by the volunteer does not notify');
  assert.equal(stopNotice(running, snapshot('waiting', 'waiting: on battery')), undefined, 'a policy hold does not notify');
  assert.equal(stopNotice(snapshot('halted', 'halted: x'), snapshot('halted', 'halted: x')), undefined, 'once per stop');
});

test('while the node runtime is down the tray says so instead of the last state', () => {
  const m = trayModel(snapshot('running', 'contributing', 3, 1), 'Node runtime stopped (exit code 1); restarting in 2 s');
  assert.equal(m.icon, 'paused');
  assert.deepEqual(m.items[0], { kind: 'status', label: 'Node runtime stopped (exit code 1); restarting in 2 s' });
  assert.match(m.tooltip, /restarting in 2 s/);
});
