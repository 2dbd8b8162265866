import assert from 'node:assert/strict';
import { test } from 'node:test';
import { statusLine, trayModel } from '../../src/main/tray-model.js';
import type { ContributionPhase, Snapshot } from '../../src/shared/api.js';

function snapshot(phase: ContributionPhase, detail = '', samplesPerSecond: number | null = null, epoch: number | null = null): Snapshot {
  return {
    version: '0',
    contribution: { phase, detail, since: 0 },
    mine: { samples: 0, computeHours: 0, share: null, rank: null, contributors: 0, samplesPerSecond, leaderboard: null },
    swarm: { peersAlive: null, samplesPerSecond: null, epoch, samplesAccumulated: null, targetBatchSize: null, etaSeconds: null, lastLoss: null, updatedAt: null, reachability: null },
    coordinator: { available: false, enabled: false, reason: 'x' },
    peers: [],
    lastLogSeq: 0,
    firstRunDone: true,
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
  assert.deepEqual(actions(snapshot('running')), ['toggle', { snooze: 15 }, { snooze: 60 }, 'open', 'quit']);
  assert.deepEqual(actions(snapshot('paused')), ['toggle', 'open', 'quit'], 'snooze is offered only while running');
});

test('the status line shows samples/s and epoch while running, and why it waits', () => {
  assert.equal(statusLine(snapshot('running', 'contributing', 12.345, 42)), 'Contributing · 12.3 samples/s · epoch 42');
  assert.equal(statusLine(snapshot('running', 'contributing')), 'Contributing');
  assert.equal(statusLine(snapshot('waiting', 'waiting: the computer runs on battery')), 'Waiting: the computer runs on battery');
  assert.equal(statusLine(snapshot('paused')), 'Paused by you');
  const m = trayModel(snapshot('waiting', 'waiting: the computer is in use'));
  assert.equal(m.icon, 'paused');
  assert.match(m.tooltip, /in use/, 'the tooltip says why it is not running');
  assert.equal(trayModel(snapshot('running')).icon, 'active');
  assert.deepEqual(m.items[0], { kind: 'status', label: 'Waiting: the computer is in use' });
});
