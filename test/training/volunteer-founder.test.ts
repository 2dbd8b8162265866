// The founder's app: the coordinator switch on, then Start (with no join code, or the node's own): the
// node trains in the run it coordinates, volunteers joining by its code average with it, and the
// coordinator checkpoints the trainer beside it. In-process nodes on loopback.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { createAverager } from '../../src/averaging/index.js';
import { loadFullState, PEER_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { STATE_PREFIX } from '../../src/collab/optimizer.js';
import { createLogger } from '../../src/log/logger.js';
import { DEFAULT_SETTINGS } from '../../src/shared/settings-schema.js';
import { openStore } from '../../src/store/index.js';
import type { TrainingEvent } from '../../src/training/events.js';
import { SharedSwarm, SwarmCoordinatorRole, VolunteerTraining, type VolunteerOptions } from '../../src/training/volunteer.js';
import { preparedDataDirs } from '../collab/processes.js';
import { capturingLogger } from '../helpers/log.js';
import { startNode, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const quiet = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const LISTEN = ['/ip4/127.0.0.1/tcp/0'];
const POLICIES = { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1, useGpu: false };

/** A node as the app makes it (volunteerParts): one swarm node shared by Start and the coordinator switch. */
function appNode(t: test.TestContext, dir: string, log: VolunteerOptions['log'], joinCode: string) {
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

const averagedWith = (events: readonly TrainingEvent[]): number[] => events.flatMap((e) => (e.type === 'averaging' && e.event.type === 'averaged' && e.event.result.status === 'complete' ? [e.event.result.group.members.length] : []));
const warnings = (lines: readonly string[]): string[] => lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 40).map((l) => l.msg);

test('coordinator switch on, then Start: the founder trains in its own run and a volunteer joining by its code averages with it', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  const [founderDir, volunteerDir] = await preparedDataDirs(path.join(root, 'template'), ['founder', 'volunteer']);
  const founder = appNode(t, founderDir!, quiet, '');
  const { joinCode } = await founder.role.start();
  // Start with the code the switch shows: the node's own
  founder.training.configure({ policies: POLICIES, joinCode, displayName: 'founder' });
  await founder.training.start();
  assert.deepEqual(founder.events.filter((e) => e.type === 'alone'), [], 'the founder trains in its run, not alone');

  const volunteer = appNode(t, volunteerDir!, quiet, joinCode);
  await volunteer.training.start();
  assert.deepEqual(volunteer.events.filter((e) => e.type === 'alone'), [], 'the volunteer reaches the founder');
  await waitFor('the founder and the volunteer to average together', () => averagedWith(founder.events).includes(2) && averagedWith(volunteer.events).includes(2), 150_000);
  await Promise.all([volunteer.close(), founder.close()]);
});

test('a founder training alone in its own run logs no warning, and its coordinator checkpoints the trainer beside it', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['founder']);
  const { log, lines } = capturingLogger();
  const founder = appNode(t, dir!, log, '');
  await founder.role.start();
  // no join code: Start trains in the run the switch founded
  await founder.training.start();
  assert.deepEqual(founder.events.filter((e) => e.type === 'alone'), [], 'the founder trains in its run, not alone');
  const checkpoints = path.join(dir!, 'checkpoints');
  await waitFor('the coordinator to checkpoint the founder’s state', () => fs.existsSync(checkpoints) && fs.readdirSync(checkpoints).some((d) => d.startsWith('epoch-')), 150_000);
  const stepped = founder.events.filter((e): e is Extract<TrainingEvent, { type: 'stepped' }> => e.type === 'stepped');
  assert.ok(stepped.length > 0 && stepped.every((e) => !e.alone), 'its steps are the swarm’s');
  assert.deepEqual(warnings(lines), [], 'nothing to warn about');

  // the app restarted: the switch serves its last checkpoint as the run's state until Start, whose trainer resumes there and serves it
  await Promise.all([founder.training.pause(), founder.role.stop()]);
  const before = founder.events.length;
  await founder.role.start();
  await founder.training.start();
  await waitFor('a step after the restart', () => founder.events.slice(before).some((e) => e.type === 'stepped' || e.type === 'halted'), 60_000);
  assert.deepEqual(founder.events.slice(before).filter((e) => e.type === 'halted' || e.type === 'alone'), [], 'the trainer serves the state the switch handed over');
  assert.deepEqual(warnings(lines), [], 'nothing to warn about after the restart either');
  await founder.close();
});

test('the switch turned on with the node’s own join code in Settings (the app restarted after founding) founds again, not "could not reach any peer"', { timeout: 120_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['founder']);
  const founder = appNode(t, dir!, quiet, '');
  const { joinCode } = await founder.role.start();
  await founder.role.stop();
  founder.training.configure({ policies: POLICIES, joinCode, displayName: 'founder' });
  await founder.role.start(); // rejected with "could not reach any peer of the join code's swarm" when it dialled itself
  await founder.training.start();
  assert.deepEqual(founder.events.filter((e) => e.type === 'alone'), [], 'Start trains in the run the switch coordinates');
});

test('paused with the switch on, the founder still serves the run’s newest state: a newcomer joining by its code loads the state its trainer saved on Pause', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['founder']);
  const founder = appNode(t, dir!, quiet, '');
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
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['founder']);
  const founder = appNode(t, dir!, quiet, '');
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
