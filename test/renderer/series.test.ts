import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartColumns } from '../../src/renderer/src/lib/series.js';

test('a chart line breaks where the node was not training (a null point in the gap), not across regular or slightly slow steps', () => {
  // steps a second apart, the node off for an hour, then steps again; one slow step of 8 s is no gap
  const t = [1000, 1001, 1002, 1010, 1011, 4611, 4612];
  const v = [7, 6.9, 6.8, 6.7, 6.6, 6.5, 6.4];
  assert.deepEqual(chartColumns({ series: 'loss', t, v }), [
    [1000, 1001, 1002, 1010, 1011, 2811, 4611, 4612],
    [7, 6.9, 6.8, 6.7, 6.6, null, 6.5, 6.4],
  ]);
  // a swarm's epochs 5 minutes apart are its rhythm, not gaps
  const epochs = [0, 300, 600, 900, 1200];
  assert.deepEqual(chartColumns({ series: 'loss', t: epochs, v: [5, 4, 3, 2, 1] }), [epochs, [5, 4, 3, 2, 1]]);
  assert.deepEqual(chartColumns(undefined), [[], []]);
  assert.deepEqual(chartColumns({ series: 'loss', t: [5], v: [1] }), [[5], [1]]);
});
