// A founder restarted on its data directory continues its run, also before its first checkpoint:
// a coordinator that founded a run and was stopped before it saved one founded a second run under
// the same id (a new `created`), and every volunteer's checkpoint then "belonged to an earlier run".
import assert from 'node:assert/strict';
import path from 'node:path';
import test from 'node:test';
import { tmpDir } from '../helpers/tmp.js';
import { spawnCli, waitFor } from './processes.js';

test('a coordinator restarted before its first checkpoint re-publishes the run it founded, not a new one', { timeout: 180_000 }, async (t) => {
  const dataDir = path.join(tmpDir(t), 'co');
  const args = ['run', '--coordinator', '--run-id', 'kept-record', '--data-dir', dataDir, '--checkpoint-every', '0', '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--target-batch-size', '48'];
  const first = spawnCli(t, args);
  await waitFor(first, /cohort run --join cohort:\S+/, 60_000);
  // stderr's lines may come after stdout's join code: waited for, not matched at once
  await waitFor(first, /founding run "kept-record"/, 30_000, 'stderr');
  first.child.kill('SIGINT');
  assert.equal(await first.exited, 0, first.stderr.slice(-2000));
  const firstEnded = Date.now();

  const again = spawnCli(t, args);
  await waitFor(again, /cohort run --join cohort:\S+/, 60_000);
  const resumed = await waitFor(again, /resuming run "kept-record" \(founded (\S+)\)/, 30_000, 'stderr');
  assert.doesNotMatch(again.stderr, /founding run/);
  again.child.kill('SIGINT');
  assert.equal(await again.exited, 0, again.stderr.slice(-2000));
  // the record's `created` (what peers' checkpoints are matched by) is the first start's, not the restart's
  const foundedAt = Date.parse(resumed[1]!);
  assert.ok(Number.isFinite(foundedAt) && foundedAt <= firstEnded, `founded ${resumed[1]}, first start ended ${new Date(firstEnded).toISOString()}`);
});
