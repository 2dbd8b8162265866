import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openStore } from '../../src/store/index.js';
import { OFFENCES_RETENTION_MS } from '../../src/store/offences.js';
import { tmpDir } from '../helpers/tmp.js';

test('offences are kept per run across reopening; a run this node has not joined for the retention time is forgotten', (t) => {
  const dir = tmpDir(t);
  const first = openStore(dir);
  const run = first.offences.forRun('run-a', 1000);
  run.record({ peer: 'p1', count: 1, reason: 'NaN' });
  run.record({ peer: 'p1', count: 2, reason: '1e30' });
  run.record({ peer: 'p2', count: 1, reason: 'NaN' });
  first.offences.forRun('run-b', 1000).record({ peer: 'p1', count: 3, reason: 'Inf' });
  first.close();

  const store = openStore(dir);
  t.after(() => store.close());
  assert.deepEqual(store.offences.forRun('run-a').load(), [
    { peer: 'p1', count: 2, reason: '1e30' },
    { peer: 'p2', count: 1, reason: 'NaN' },
  ]);
  assert.deepEqual(store.offences.forRun('run-c').load(), [], 'another run starts with none');
  // later, run-a is joined again; later still, another run opens: run-b, not joined since its offences, is forgotten
  const now = Date.now();
  store.offences.forRun('run-a', now + OFFENCES_RETENTION_MS / 2);
  store.offences.forRun('run-c', now + OFFENCES_RETENTION_MS + 1);
  assert.equal(store.offences.forRun('run-a').load().length, 2, 'a run joined within the retention time keeps its offences');
  assert.deepEqual(store.offences.forRun('run-b').load(), [], 'a run not joined for the retention time is forgotten');
});
