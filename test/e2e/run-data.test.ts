// The dashboard's run-data panel in headless Chromium during a real fetch: a coordinator process
// pins a dataset of many small shards; the node (real `cohort start`, empty data directory) joins by
// code, fetches them from the coordinator, and the panel shows the fetch's MB and shards.
import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { prepareManyShards } from '../helpers/datasets.js';
import { skipWhenMissing } from '../helpers/skip.js';
import { tmpDir } from '../helpers/tmp.js';
import { chromiumMissing, ensureRendererBuilt, joinFromDashboard, startCoordinator } from './browser.js';

const skip = skipWhenMissing(chromiumMissing(), 'the browser run-data test');

const FETCH = { timeout: 180_000 };

describe('the run-data panel', { skip }, () => {
  before(ensureRendererBuilt);

  test('a node that joins a run pinning data it lacks shows the fetch from the swarm: MB and shards, up to done', { timeout: 300_000 }, async (t) => {
    const root = tmpDir(t);
    const coDir = path.join(root, 'co');
    const info = await prepareManyShards(coDir);
    const code = await startCoordinator(t, 'e2e-run-data', coDir);
    const { page, errors } = await joinFromDashboard(t, code);

    const progress = page.getByTestId('fetch-progress');
    const line = /^([\d.]+) of ([\d.]+) MB \((\d+) %\) · (\d+)\/(\d+) shards · [\d.]+ MB\/s · /;
    await progress.filter({ hasText: line }).waitFor(FETCH);
    const title = page.locator('section:has(#run-data-title)');
    assert.match(await title.innerText(), new RegExp(`Fetching dataset ${info.datasetId!.slice(0, 12)}… from the swarm`));
    // the fetch ends with every shard held and the panel says so (it stays once done)
    await progress.filter({ hasText: / · done$/ }).waitFor(FETCH);
    const [, got, total, pct, done, shards] = line.exec(await progress.innerText())!;
    assert.equal(pct, '100');
    assert.equal(got, total);
    assert.equal(Number(total), Number((info.bytes / 1024 ** 2).toFixed(1)));
    assert.equal(Number(done), info.shardCount);
    assert.equal(Number(shards), info.shardCount);
    assert.equal(Number(await page.locator('#fetch-progress').getAttribute('value')), info.bytes, 'the bar is full');
    assert.deepEqual(errors, []);
  });
});
