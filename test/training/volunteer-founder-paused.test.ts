// The founder's app paused, or Start with a join code of another swarm while the coordinator switch is
// on: what newcomers and the dashboard get. In-process nodes on loopback.
import assert from 'node:assert/strict';
import test from 'node:test';
import { createAverager } from '../../src/averaging/index.js';
import { loadFullState, PEER_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { STATE_PREFIX } from '../../src/collab/optimizer.js';
import { startNode, waitFor } from '../helpers/swarm.js';
import { founderNode, POLICIES } from './app-node.js';

test('paused with the switch on, the founder still serves the run’s newest state: a newcomer joining by its code loads the state its trainer saved on Pause', { timeout: 180_000 }, async (t) => {
  const founder = await founderNode(t);
  const { joinCode } = await founder.role.start();
  await founder.training.start();
  await waitFor('a step of the founder', () => founder.events.some((e) => e.type === 'stepped' && e.epoch >= 1), 150_000);
  await founder.training.pause();
  const saved = loadFullState(founder.store, PEER_STATE_CHECKPOINT, { runId: 'founded-in-app' });
  assert.ok(saved !== undefined && saved.state.epoch >= 1, 'Pause saved the trainer’s state');

  // nothing trains on the founder's node now; without the coordinator serving, no peer would advertise a state
  const newcomer = await startNode(t, { initialPeers: [joinCode] });
  const loader = createAverager(newcomer, { prefix: STATE_PREFIX });
  t.after(() => loader.stop());
  let loaded: Awaited<ReturnType<typeof loader.loadStateFromPeers>> | undefined;
  await waitFor('the newcomer to load the run’s state', async () => (loaded = await loader.loadStateFromPeers({ minEpoch: saved.state.epoch }).catch(() => undefined)) !== undefined, 30_000);
  assert.equal(loaded!.donor, founder.swarm.peerId(), 'the founder’s coordinator serves it');
  assert.equal(loaded!.epoch, saved.state.epoch);
  assert.ok(Buffer.from(loaded!.data).equals(Buffer.from(saved.bytes)), 'the state is the one the trainer saved on Pause');
});

test('the switch on and a join code of another swarm in Settings: Start trains in the switch’s run and the dashboard says so, with what to do', { timeout: 120_000 }, async (t) => {
  const founder = await founderNode(t);
  await founder.role.start();
  const other = await startNode(t, { runId: 'another-swarm' });
  founder.training.configure({ policies: POLICIES, joinCode: other.joinCode(), displayName: 'founder' });
  assert.deepEqual(founder.swarm.notices(), [], 'nothing to tell before Start');
  await founder.training.start();
  assert.deepEqual(founder.events.filter((e) => e.type === 'joined').map((e) => e.type === 'joined' && e.runId), ['founded-in-app']);
  const notices = founder.swarm.notices();
  assert.deepEqual(notices.map((n) => n.kind), ['coordinated-run']);
  assert.match(notices[0]!.text, /Start trains in the run "founded-in-app" this node coordinates, not in "another-swarm" of the join code in Settings\. To train with that swarm, turn the coordinator switch off/);
  await founder.close();
});
