import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ContributionMachine, contributionPhase } from '../../src/node/contribution-machine.js';

test('the phase follows intent and hold; a user pause wins over any policy', () => {
  const phase = (intent: 'never-started' | 'contribute' | 'paused', hold?: string) => contributionPhase({ intent, hold, limitation: undefined }).phase;
  assert.equal(phase('never-started'), 'stopped');
  assert.equal(phase('never-started', 'on battery'), 'stopped');
  assert.equal(phase('contribute'), 'running');
  assert.equal(phase('contribute', 'on battery'), 'waiting');
  assert.equal(phase('paused'), 'paused');
  assert.equal(phase('paused', 'on battery'), 'paused');
});

test('the machine reports only visible changes and keeps `since` while the phase stays', () => {
  const m = new ContributionMachine('never-started', undefined, 1000);
  assert.equal(m.update({ intent: 'contribute' }, 2000), true);
  assert.deepEqual(m.status, { phase: 'running', detail: 'contributing', since: 2000 });
  assert.equal(m.update({ intent: 'contribute' }, 3000), false);
  assert.equal(m.update({ hold: 'on battery' }, 4000), true);
  assert.equal(m.status.since, 4000);
  assert.equal(m.update({ hold: 'in use' }, 5000), true, 'a new reason is shown');
  assert.equal(m.status.since, 4000, 'still waiting since the first hold');
});
