// `cohort run` and the `run` record through the real CLI: a founder publishes its flags, a joiner
// adopts them (and re-publishes them), `cohort status` prints them, a contradicting flag exits 2.
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { RUN_KEY, runParamsRecords } from '../../src/collab/run-params.js';
import { runCli } from '../helpers/cli.js';
import { startNode, waitFor as waitUntil } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';
import { spawnCli, waitFor } from './processes.js';

// Joiners serve at once (no AutoNAT wait): what they serve is not what these tests are about.
const LISTEN = ['--listen', '/ip4/127.0.0.1/tcp/0'];
const PUBLIC = ['--reachability', 'public'];

test('a founder publishes its flags; a joiner adopts and re-publishes them; cohort status prints them; a contradicting flag exits 2', { timeout: 90_000 }, async (t) => {
  const root = tmpDir(t);
  const founder = spawnCli(t, ['run', '--coordinator', '--run-id', 'params-cli', '--data-dir', path.join(root, 'founder'), ...LISTEN, '--refresh', '1', '--target-batch-size', '40', '--lr', '0.01', '--seq-len', '64']);
  const [, founderId] = await waitFor(founder, /coordinator (12D3[1-9A-HJ-NP-Za-km-z]+)/, 30_000);
  const [, code] = await waitFor(founder, /cohort run --join (cohort:\S+)/, 30_000);

  const joiner = spawnCli(t, ['run', '--coordinator', '--join', code!, '--data-dir', path.join(root, 'joiner'), ...LISTEN, ...PUBLIC, '--refresh', '1', '--log-format', 'json']);
  const [, joinerId] = await waitFor(joiner, /coordinator (12D3[1-9A-HJ-NP-Za-km-z]+)/, 30_000);
  const [adopted] = await waitFor(joiner, /adopting the swarm's run parameters[^"]*/, 30_000, 'stderr');
  assert.ok(adopted.includes(`published by ${founderId}`), adopted);
  for (const part of ['seq len 64', 'target batch size 40', 'peak lr 0.01', 'preset tiny']) assert.ok(adopted.includes(part), `${part} in: ${adopted}`);

  const [status, contradicting, printed] = await Promise.all([
    runCli(['status', '--join', code!, '--json', '--wait', '10', '--log-level', 'error']),
    runCli(['run', '--join', code!, '--target-batch-size', '512', '--data-dir', path.join(root, 'contradicting'), ...LISTEN, ...PUBLIC, '--log-level', 'error']),
    runCli(['status', '--join', code!, '--wait', '10', '--log-level', 'error']),
  ]);
  // nobody trains yet: the list says so rather than ending at its heading
  assert.equal(printed.code, 0, printed.stderr);
  assert.match(printed.stdout, /^top contributors \([^)]*\): none yet \(no samples recorded\)$/m);
  assert.equal(contradicting.code, 2, contradicting.stderr);
  assert.ok(contradicting.stderr.includes(`--target-batch-size: 512 contradicts the swarm's 40 (published by ${founderId}); omit it to adopt the swarm's`), contradicting.stderr);
  assert.equal(status.code, 0, status.stderr);
  const view = JSON.parse(status.stdout.trim().split('\n').at(-1)!) as { targetBatchSize: number; runParams: { targetBatchSize: number; seqLen: number; peakLr: number; publishedBy: string } | null };
  assert.equal(view.runParams?.publishedBy, founderId);
  assert.equal(view.runParams?.targetBatchSize, 40);
  assert.equal(view.runParams?.seqLen, 64);
  assert.equal(view.runParams?.peakLr, 0.01);
  assert.equal(view.targetBatchSize, 40, 'the ETA uses the swarm’s target batch size');

  // the joiner keeps the founder's record alive under its own signature
  const reader = await startNode(t, { initialPeers: code!, clientMode: true });
  await reader.ready;
  await waitUntil('both peers to hold the run record', async () => {
    const owners = [...(await runParamsRecords(reader).get(RUN_KEY)).values()].map((e) => [e.owner, e.value.targetBatchSize]);
    return owners.some(([o, tbs]) => o === founderId && tbs === 40) && owners.some(([o, tbs]) => o === joinerId && tbs === 40);
  });

  joiner.child.kill('SIGTERM');
  founder.child.kill('SIGTERM');
  assert.equal(await joiner.exited, 0, joiner.stderr.slice(-2000));
  assert.equal(await founder.exited, 0, founder.stderr.slice(-2000));
});
