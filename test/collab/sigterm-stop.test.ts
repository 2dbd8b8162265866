// A SIGTERMed `cohort run` peer in a swarm stops cleanly and exits (the swarm lab saw trained peers
// that saved and printed their summary still alive 60 s later); a second signal exits at once.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { multiaddr } from '@multiformats/multiaddr';
import { encodeJoinCode } from '../../src/swarm/join-code.js';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';
import { preparedDataDirs, spawnCli, waitFor, type Proc } from './processes.js';

const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '48', '--refresh', '1', '--lr', '0.01', '--warmup-steps', '1', '--total-steps', '1000'];
const TRAIN = [...COMMON, '--batch-size', '4', '--matchmaking-time', '2', '--averaging-timeout', '15', '--threads', '1'];

/** Milliseconds from now until `proc` exits, with its exit code and signal. */
async function exitAfter(proc: Proc): Promise<{ ms: number; code: number | null; signal: NodeJS.Signals | null }> {
  const started = Date.now();
  const code = await proc.exited;
  return { ms: Date.now() - started, code, signal: proc.child.signalCode };
}

test('a SIGTERMed peer mid-training prints its summary and exits 0; a second signal exits at once', { timeout: 240_000 }, async (t) => {
  const root = tmpDir(t);
  const [a, b] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'sigterm-test', '--data-dir', path.join(root, 'co'), '--checkpoint-every', '0', ...COMMON]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 60_000);
  const peers = [a, b].map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir!, ...TRAIN]));
  await Promise.all(peers.map((p) => waitFor(p, /Averaged gradients with 2 peers/, 150_000, 'stderr')));

  // mid-training, connected to a peer and the coordinator, with its averagers' rounds and timers live
  const [stopped, doubled] = peers as [Proc, Proc];
  stopped.child.kill('SIGTERM');
  const clean = await exitAfter(stopped);
  assert.equal(clean.code, 0, stopped.stderr.slice(-3000));
  const summary = JSON.parse(stopped.stdout.trim().split('\n').at(-1)!) as { role: string; epoch: number };
  assert.equal(summary.role, 'peer');
  // a bound on a hang, not a timing goal: it saves its state and stops its node, then nothing keeps it
  assert.ok(clean.ms < 30_000, `exited ${clean.ms} ms after SIGTERM`);

  // a volunteer who presses Ctrl+C twice means now: the second signal does not wait for the clean stop
  doubled.child.kill('SIGINT');
  await new Promise((resolve) => setTimeout(resolve, 200));
  doubled.child.kill('SIGINT');
  const forced = await exitAfter(doubled);
  assert.equal(forced.code, 130, doubled.stderr.slice(-3000));
  assert.match(doubled.stderr, /second signal/);
  co.child.kill('SIGTERM');
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));
});

/** Resolves with the exit code, or undefined when `proc` still runs after `ms` (a hang: it waits for a second signal). */
async function exitWithin(proc: Proc, ms: number): Promise<number | null | undefined> {
  return Promise.race([proc.exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);
}

test('a coordinator signalled while it prepares its --data-source stops there and exits 0, leaving no dataset and starting no swarm', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  // plain text large enough that the preparation is still running when the signal comes
  const corpus = path.join(root, 'corpus.txt');
  const line = (i: number) => `The river number ${i} flows past the mountain ${i % 97}. Its valley holds ${i % 13} towns and a bridge.`;
  fs.writeFileSync(corpus, Array.from({ length: 150_000 }, (_, i) => line(i)).join('\n\n'));
  const dataDir = path.join(root, 'co');
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'stop-while-preparing', '--data-dir', dataDir, '--data-source', corpus, ...COMMON]);
  await waitFor(co, /preparing the run's data/, 60_000, 'stderr');
  co.child.kill('SIGINT');
  // without the stop reaching the preparation, it went on, started the swarm and waited for a second signal
  assert.equal(await exitWithin(co, 90_000), 0, co.out().slice(-3000));
  assert.match(co.stderr, /stopped while starting: nothing to save yet/);
  assert.doesNotMatch(co.stdout, /cohort run --join/);
  const stats = await runCli(['data', 'stats', '--json', '--data-dir', dataDir]);
  assert.deepEqual((JSON.parse(stats.stdout) as { datasets: unknown[] }).datasets, []);
});

test('a joiner signalled while it looks for the run record exits 0 with a line saying so, not an AbortError stack', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  // a swarm peer publishes no run record: the joiner keeps looking
  const seed = spawnCli(t, ['swarm', 'start', '--run-id', 'no-record', '--data-dir', path.join(root, 'seed'), '--host-maddrs', '/ip4/127.0.0.1/tcp/0']);
  const [, code] = await waitFor(seed, /Join code \(pass it to --initial-peers\): (cohort:\S+)/, 60_000);
  const joiner = spawnCli(t, ['run', '--join', code!, '--data-dir', path.join(root, 'joiner'), ...TRAIN]);
  await waitFor(joiner, /no run record found yet/, 90_000, 'stderr');
  joiner.child.kill('SIGINT');
  assert.equal(await exitWithin(joiner, 60_000), 0, joiner.stderr.slice(-3000));
  assert.match(joiner.stderr, /stopped while starting: nothing to save yet/);
  assert.doesNotMatch(joiner.stderr, /AbortError/);
  seed.child.kill('SIGTERM');
  assert.equal(await seed.exited, 0, seed.stderr.slice(-3000));
});

test('run and swarm start signalled while their initial peer does not answer stop there, exit 0, without waiting out the bootstrap’s retries', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  // a valid peer at an address where nothing listens (port 9): every dial is refused, the bootstrap retries
  const gone = `/ip4/127.0.0.1/tcp/9/p2p/${peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString()}`;
  const code = encodeJoinCode({ runId: 'gone-run', bootstrap: [multiaddr(gone)] });
  const nodes = [
    spawnCli(t, ['run', '--join', code, '--data-dir', path.join(root, 'run'), ...TRAIN]),
    spawnCli(t, ['swarm', 'start', '--run-id', 'gone-run', '--initial-peers', gone, '--data-dir', path.join(root, 'swarm'), '--host-maddrs', '/ip4/127.0.0.1/tcp/0']),
  ];
  for (const node of nodes) {
    await waitFor(node, /did not answer \(attempt 1\//, 60_000, 'stderr');
    node.child.kill('SIGTERM');
    assert.equal(await exitWithin(node, 60_000), 0, node.stderr.slice(-3000));
    assert.match(node.stderr, /stopped while starting/);
    // the bootstrap's last attempt (seconds of back-off later) never came: it stopped at the signal
    assert.doesNotMatch(node.stderr, /none of the 1 initial peer\(s\) answered/);
  }
});
