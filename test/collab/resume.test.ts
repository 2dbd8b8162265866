// Runs outlive their peers, with real `cohort run` processes on loopback: a coordinator and two peers
// train; all three are SIGKILLed; the coordinator and one peer restart on their data directories and
// the run continues at its last checkpointed epoch with the loss where it was, not from new weights.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { PEER_STATE_CHECKPOINT, SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { openStore } from '../../src/store/index.js';
import { waitFor as waitUntil } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor, type Proc } from './processes.js';

const RUN = 'resume-test';
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--run-id', RUN, '--target-batch-size', '32', '--seq-len', '32', '--refresh', '0.5', '--lr', '1', '--warmup-steps', '1', '--total-steps', '1000'];
// the peers save their state after every epoch, the coordinator checkpoints every second epoch; a
// high learning rate and short sequences so the loss falls well below ln V within a few epochs
const TRAIN = [...COMMON, '--batch-size', '8', '--matchmaking-time', '2', '--averaging-timeout', '15', '--threads', '1', '--save-state-every', '0'];
const COORDINATOR = ['run', '--coordinator', ...COMMON, '--checkpoint-every', '2'];

/** Every `Step #E, loss L` a peer logged, in order. */
function steps(p: Proc): Array<{ epoch: number; loss: number }> {
  return [...p.stderr.matchAll(/Step #(\d+), loss ([\d.]+)/g)].map((m) => ({ epoch: Number(m[1]), loss: Number(m[2]) }));
}

function lastSaved(p: Proc, pattern: RegExp): number {
  return Math.max(-1, ...[...p.stderr.matchAll(pattern)].map((m) => Number(m[1])));
}

test('coordinator and peers SIGKILLed; the coordinator and one peer restarted on their data directories continue at the last checkpointed epoch', { timeout: 480_000 }, async (t) => {
  const root = tmpDir(t);
  const [a, b] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b']);
  const coDir = path.join(root, 'co');
  const co = spawnCli(t, [...COORDINATOR, '--data-dir', coDir]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peers = [a, b].map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir!, ...TRAIN]));
  // how many epochs it takes to learn depends on how the machine's load splits the batch between the
  // peers, so the kill waits for learning (bounded), then for checkpoints of an epoch at least that late
  await waitUntil('peer a to log a loss 0.8 below its first', () => {
    const s = steps(peers[0]!);
    for (const p of [co, ...peers]) if (p.child.exitCode !== null) throw new Error(`a process exited (${p.child.exitCode}): ${p.stderr.slice(-2000)}`);
    return s.length > 1 && s[0]!.loss - s.at(-1)!.loss > 0.8;
  }, 180_000);
  const learnt = steps(peers[0]!).at(-1)!.epoch;
  await waitUntil(`a coordinator checkpoint of epoch ≥ 2 and peer a's state of epoch ≥ ${learnt}`, () =>
    lastSaved(co, /saved checkpoint of epoch (\d+)/g) >= 2 && lastSaved(peers[0]!, /saved this peer's state of epoch (\d+)/g) >= learnt, 120_000);
  for (const p of [co, ...peers]) p.child.kill('SIGKILL');
  await Promise.all([co, ...peers].map((p) => p.exited));
  const before = steps(peers[0]!);
  const checkpointed = Math.max(lastSaved(co, /saved checkpoint of epoch (\d+)/g), lastSaved(peers[0]!, /saved this peer's state of epoch (\d+)/g));

  const co2 = spawnCli(t, [...COORDINATOR, '--data-dir', coDir]);
  const [, code2] = await waitFor(co2, /cohort run --join (cohort:\S+)/, 30_000);
  await waitFor(co2, /resuming run "resume-test"/, 30_000, 'stderr');
  const a2 = spawnCli(t, ['run', '--join', code2!, '--data-dir', a!, ...TRAIN]);
  await waitFor(a2, /Step #\d+, loss/, 90_000, 'stderr');
  const resumed = Number(a2.stderr.match(/resuming from this peer's checkpoint of epoch (\d+)/)?.[1]);
  assert.ok(resumed >= learnt, `peer a resumed from epoch ${resumed}; it had saved epoch ${learnt} or later`);
  assert.match(a2.stderr, /adopting the swarm's run parameters/);
  const [first] = steps(a2);
  assert.ok(first!.epoch > checkpointed, `first step after the restart is #${first!.epoch}; the last checkpointed epoch was ${checkpointed}`);
  // the loss continues: nearer the loss the restored model (the state of epoch `resumed`) showed before the
  // kill than the first one of the run. Its loss is step #resumed + 1's (or #resumed's, if the kill came
  // first), not the last step's: saving lags the steps, and at this learning rate a few epochs move the loss by 1
  const start = before[0]!.loss;
  const then = (before.find((s) => s.epoch === resumed + 1) ?? before.find((s) => s.epoch === resumed))!.loss;
  const trace = `steps before the kill ${JSON.stringify(before)}, after ${JSON.stringify(steps(a2))}`;
  assert.ok(start - then > 0.5, `the restored model had not learnt (${start} → ${then}): ${trace}`);
  assert.ok(Math.abs(first!.loss - then) < Math.abs(first!.loss - start), `loss after the restart ${first!.loss}: back near the start ${start}, not at ${then}: ${trace}`);
  for (const p of [co2, a2]) p.child.kill('SIGKILL');
  await Promise.all([co2.exited, a2.exited]);

  for (const [dir, kind] of [[coDir, SWARM_STATE_CHECKPOINT], [a!, PEER_STATE_CHECKPOINT]] as const) {
    const store = openStore(dir);
    try {
      assert.equal(store.db.pragma('integrity_check', { simple: true }), 'ok');
      assert.ok(store.checkpoints.list(kind).length > 0, `${dir} keeps ${kind} checkpoints`);
    } finally {
      store.close();
    }
  }
});
