// 3 training peers + a coordinator as real `cohort run` processes on loopback: one peer throttled to
// a third of the speed, one claiming 10× its samples.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import Database from 'better-sqlite3';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor } from './processes.js';

const EPOCHS = 8;
// run-wide flags (target batch, LR schedule) go to the coordinator too: it founds the swarm and publishes them
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '48', '--refresh', '1', '--lr', '0.05', '--warmup-steps', '1', '--total-steps', '1000'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', String(EPOCHS), '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1'];

interface Summary {
  peer: string;
  epoch: number;
  losses: Array<{ epoch: number; loss: number }>;
  averaged: number;
  skippedMicroBatches: number;
}

test('3 peers and a coordinator: epochs advance together, loss falls, metrics and a loadable checkpoint; a slow peer counts; an inflated claim is capped and flagged', { timeout: 240_000 }, async (t) => {
  const root = tmpDir(t);
  const [a, b, c] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b', 'c']);
  const coDir = path.join(root, 'coordinator');
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'collab-test', '--data-dir', coDir, '--checkpoint-every', '3', '--keep-checkpoints', '2', ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  assert.match(co.stdout, /Visible multiaddr: \/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/12D3Koo\w+/);
  const peers = [
    // alice computes in fp16 with dynamic loss scaling (its averaged gradients are float32 like the others')
    spawnCli(t, ['run', '--join', code!, '--data-dir', a!, '--display-name', 'alice', '--precision', 'fp16', ...TRAIN]),
    spawnCli(t, ['run', '--join', code!, '--data-dir', b!, '--display-name', 'slow-bob', '--throttle', '3', ...TRAIN]),
    spawnCli(t, ['run', '--join', code!, '--data-dir', c!, '--display-name', 'liar', '--fault-inflate-claims', '10', ...TRAIN]),
  ];
  const codes = await Promise.all(peers.map((p) => p.exited));
  const summaries = peers.map((p, i) => {
    assert.equal(codes[i], 0, p.stderr.slice(-3000));
    return JSON.parse(p.stdout.trim().split('\n').at(-1)!) as Summary;
  });
  // let the coordinator take one more look; then `cohort status` reads the swarm through it
  await new Promise((r) => setTimeout(r, 2500));
  const status = await runCli(['status', '--join', code!, '--target-batch-size', '48', '--json', '--log-level', 'error', '--data-dir', path.join(root, 'status')]);
  assert.equal(status.code, 0, status.stderr);
  const view = JSON.parse(status.stdout) as { epoch: number; peers: number; contributors: Array<{ name: string; verified: boolean; computeHours?: number }> };
  // the run's epoch stays; the three peers stopped and said so, so none is counted as training
  assert.ok(view.epoch >= EPOCHS && view.peers === 0, status.stdout);
  assert.ok(view.contributors.some((c) => c.name === 'slow-bob' && c.verified && c.computeHours! > 0), status.stdout);
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));

  for (const [i, p] of peers.entries()) {
    assert.ok(summaries[i]!.epoch >= EPOCHS, `peer ${i} stopped at epoch ${summaries[i]!.epoch}`);
    assert.match(p.stderr, /Collaboration accumulated \d+ samples from \d+ peers; ETA [\d.]+ seconds \(refresh in [\d.]+ s\)/);
    assert.match(p.stderr, /Averaged gradients with [23] peers/, `peer ${i} never averaged with another peer:\n${peers.map((q, k) => `peer ${k}:\n${averagingLines(q.stderr)}`).join('\n')}`);
    assert.match(p.stderr, /Step #\d+, loss \d/);
    assert.ok(summaries[i]!.averaged > 0, `peer ${i} never averaged`);
  }
  // hivemind's pre-scheduling: near the epoch's end a peer starts matchmaking while it still computes
  assert.ok(peers.some((p) => /Pre-scheduling gradient averaging round in [\d.]+ sec/.test(p.stderr)), 'no peer pre-scheduled its averaging');
  // an overflow drops a micro-batch; GradScaler's initial 2^16 fits the tiny model, so alice stays in step
  assert.ok(summaries[0]!.skippedMicroBatches <= 1, `alice skipped ${summaries[0]!.skippedMicroBatches} fp16 micro-batches`);
  assert.equal(summaries[1]!.skippedMicroBatches, 0, 'fp32 peers never skip');
  // every peer took the same steps: the epochs each reached are the swarm's
  const firstLoss = mean(summaries.flatMap((s) => s.losses.slice(0, 2).map((l) => l.loss)));
  const lastLoss = mean(summaries.flatMap((s) => s.losses.slice(-2).map((l) => l.loss)));
  t.diagnostic(`loss ${firstLoss.toFixed(4)} → ${lastLoss.toFixed(4)}`);
  assert.ok(lastLoss < firstLoss, `loss did not fall: ${firstLoss} → ${lastLoss}`);

  const db = new Database(path.join(coDir, 'cohort.db'), { readonly: true });
  t.after(() => db.close());
  const lossEpochs = db.prepare("SELECT DISTINCT epoch FROM metrics WHERE series = 'loss' AND peer = '' ORDER BY epoch").all() as Array<{ epoch: number }>;
  assert.ok(lossEpochs.length >= 3, `coordinator recorded swarm loss for epochs ${JSON.stringify(lossEpochs)}`);
  const credited = (peer: string): number => (db.prepare("SELECT MAX(value) AS v FROM metrics WHERE series = 'credited_samples' AND peer = ?").get(peer) as { v: number | null }).v ?? 0;
  const flagged = (peer: string): number => (db.prepare("SELECT COUNT(*) AS n FROM metrics WHERE series = 'flagged_claim' AND peer = ?").get(peer) as { n: number }).n;
  const [alice, bob, liar] = summaries.map((s) => s.peer);
  const coSummary = JSON.parse(co.stdout.trim().split('\n').at(-1)!) as { flagged: Array<{ peerId: string; claimed: number; credited: number; flag?: string }> };
  const flagsOf = (peer: string) => JSON.stringify(coSummary.flagged.filter((f) => f.peerId === peer));
  assert.ok(credited(bob!) > 0, 'the throttled peer’s samples were not counted');
  assert.equal(flagged(alice!), 0, `an honest peer was flagged: ${flagsOf(alice!)}`);
  assert.equal(flagged(bob!), 0, `the throttled honest peer was flagged: ${flagsOf(bob!)}`);
  assert.ok(flagged(liar!) > 0, 'the inflated claim was not flagged');
  for (const f of coSummary.flagged.filter((x) => x.peerId === liar)) assert.ok(f.credited * 5 <= f.claimed, `liar credited ${f.credited} of ${f.claimed} claimed`);

  const checkpoints = fs.readdirSync(path.join(coDir, 'checkpoints'));
  assert.ok(checkpoints.length >= 1 && checkpoints.length <= 2, `checkpoints kept: ${checkpoints.join(', ')}`);
  const batch = path.join(root, 'batch.json');
  fs.writeFileSync(batch, JSON.stringify({ input_ids: [[2, 10, 4, 12, 3]], token_type_ids: [[0, 0, 0, 1, 1]], attention_mask: [[1, 1, 1, 1, 1]], labels: [[-100, -100, 11, -100, -100]], sentence_order_label: [0] }));
  const loss = await runCli(['model', 'loss', '--model', path.join(coDir, 'checkpoints', checkpoints.sort().at(-1)!), '--batch', batch, '--provider', 'cpu', '--log-level', 'error']);
  assert.equal(loss.code, 0, loss.stderr);
  assert.ok(Number.isFinite((JSON.parse(loss.stdout) as { loss: number }).loss));
});

// the lines that tell why a peer's rounds did or did not average, for a failure message
function averagingLines(stderr: string): string {
  return stderr.split('\n').filter((l) => /averag|group|epoch|Step #|loading state/i.test(l)).slice(-30).join('\n');
}

function mean(xs: number[]): number {
  return xs.reduce((s, x) => s + x, 0) / xs.length;
}
