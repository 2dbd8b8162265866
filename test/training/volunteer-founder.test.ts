// The founder's app: the coordinator switch on, then Start (with no join code, or the node's own): the
// node trains in the run it coordinates, volunteers joining by its code average with it, and the
// coordinator checkpoints the trainer beside it. In-process nodes on loopback.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import type { TrainingEvent } from '../../src/training/events.js';
import { preparedDataDirs } from '../collab/processes.js';
import { capturingLogger } from '../helpers/log.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';
import { appNode, founderNode, POLICIES, quiet } from './app-node.js';

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
  const { log, lines } = capturingLogger();
  const founder = await founderNode(t, log);
  await founder.role.start();
  // no join code: Start trains in the run the switch founded
  await founder.training.start();
  assert.deepEqual(founder.events.filter((e) => e.type === 'alone'), [], 'the founder trains in its run, not alone');
  const checkpoints = path.join(founder.dir, 'checkpoints');
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
  const founder = await founderNode(t);
  const { joinCode } = await founder.role.start();
  await founder.role.stop();
  founder.training.configure({ policies: POLICIES, joinCode, displayName: 'founder' });
  await founder.role.start(); // rejected with "could not reach any peer of the join code's swarm" when it dialled itself
  await founder.training.start();
  assert.deepEqual(founder.events.filter((e) => e.type === 'alone'), [], 'Start trains in the run the switch coordinates');
});
