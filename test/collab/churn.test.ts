// Churn with real `cohort run` processes on loopback: a peer SIGKILLed mid-run and a newcomer that
// joins mid-run (loading the swarm's state first). Training continues and everyone ends on one epoch.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const EPOCHS = 12;
// run-wide flags (target batch, LR schedule) go to the coordinator too: it founds the swarm and publishes them.
// The target batch keeps epochs long enough (a second or more) for the newcomer's first micro-batch to
// land mid-run: groups close as soon as every expected peer joined, so epochs no longer wait out the
// matchmaking time
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '96', '--refresh', '1', '--lr', '0.01', '--warmup-steps', '1', '--total-steps', '1000'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', String(EPOCHS), '--matchmaking-time', '2', '--averaging-timeout', '15', '--threads', '1'];

test('a peer killed mid-epoch and a newcomer joining mid-run: no hang, the newcomer loads state, all end on the same epoch', { timeout: 240_000 }, async (t) => {
  const root = tmpDir(t);
  const [a, b, k, n] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b', 'killed', 'newcomer']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'churn-test', '--data-dir', path.join(root, 'co'), '--checkpoint-every', '0', ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const stayers = [a, b].map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir!, ...TRAIN]));
  const killed = spawnCli(t, ['run', '--join', code!, '--data-dir', k!, ...TRAIN]);
  await waitFor(killed, /Step #2,/, 90_000, 'stderr');
  await waitFor(killed, /Collaboration accumulated/, 30_000, 'stderr'); // mid-epoch: it has gradients of epoch 3 in hand
  killed.child.kill('SIGKILL');
  await Promise.all(stayers.map((p) => waitFor(p, /Step #3,/, 90_000, 'stderr')));
  // the stayers wait (SIGSTOP) while the newcomer starts up, however slow the machine: otherwise they
  // can finish the run before it joins. Their matchmaking may then time out once: a local step
  for (const p of stayers) p.child.kill('SIGSTOP');
  const newcomer = spawnCli(t, ['run', '--join', code!, '--data-dir', n!, ...TRAIN]);
  try {
    // or, if its start-up outlasted the frozen stayers' state advertisements (30 s), it leaves their
    // progress out and trains on its own until they advertise again
    await waitFor(newcomer, /loading state from peers|leaving their progress out/, 90_000, 'stderr');
  } finally {
    for (const p of stayers) p.child.kill('SIGCONT');
  }
  const all = [...stayers, newcomer];
  const codes = await Promise.all(all.map((p) => p.exited));
  co.child.kill('SIGTERM');
  const summaries = all.map((p, i) => {
    assert.equal(codes[i], 0, p.stderr.slice(-3000));
    return JSON.parse(p.stdout.trim().split('\n').at(-1)!) as { epoch: number; losses: Array<{ epoch: number }>; loadedState: number };
  });
  const loaded = newcomer.stderr.match(/loaded state of epoch (\d+) from/);
  assert.ok(loaded, `the newcomer did not load state: ${newcomer.stderr.slice(-2000)}`);
  assert.ok(Number(loaded[1]) >= 3, `the newcomer loaded epoch ${loaded[1]}, the swarm was past 3`);
  // after catching up it steps on the swarm's epochs, never behind; before, only if it had left the
  // frozen stayers' progress out (then it trained on its own, at its own epochs)
  const losses = summaries[2]!.losses;
  const caughtUp = losses.findIndex((l) => l.epoch > Number(loaded[1]));
  assert.ok(caughtUp >= 0 && losses.slice(caughtUp).every((l) => l.epoch > Number(loaded[1])), JSON.stringify(summaries[2]));
  if (!/leaving their progress out/.test(newcomer.stderr)) assert.equal(caughtUp, 0, `it stepped before loading: ${JSON.stringify(losses)}`);
  assert.deepEqual(new Set(summaries.map((s) => s.epoch)).size, 1, `final epochs differ: ${summaries.map((s) => s.epoch).join(', ')}`);
  assert.ok(summaries[0]!.epoch >= EPOCHS);
  assert.equal(await co.exited, 0, co.stderr.slice(-2000));
});
