// The dashboard's advice for a node on other data, in headless Chromium, with real processes: a
// coordinator founds a run that pins no data (its data directory holds none), so each peer trains on
// what it prepared; a real peer (`cohort run --join`) trains on one dataset, the node (real
// `cohort start`) on another of the same shape (same tokenizer and vocabulary, other examples).
// Matchmaking never groups them: the peer says it will not average with the node's data, and the
// node's page says why and what to do.
import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { DATA_MISMATCH_ADVICE } from '../../src/collab/optimizer.js';
import type { DatasetInfo } from '../../src/data/index.js';
import { spawnCli, waitFor } from '../collab/processes.js';
import { prepareManyShards } from '../helpers/datasets.js';
import { tmpDir } from '../helpers/tmp.js';
import { chromiumMissing, ensureRendererBuilt, joinFromDashboard, startCoordinator } from './browser.js';

const skip = chromiumMissing();
if (skip) process.stderr.write(`SKIPPING the browser data-mismatch test: ${skip}\n`);

describe('the advice for a node on other data', { skip }, () => {
  before(ensureRendererBuilt);

  test('a node whose data differ from its peer’s is refused by that peer and the page shows the reason and what to do', { timeout: 300_000 }, async (t) => {
    const root = tmpDir(t);
    const code = await startCoordinator(t, 'e2e-data-mismatch', path.join(root, 'co'));
    const peerDir = path.join(root, 'peer');
    const theirs = await prepareManyShards(peerDir);
    const peer = spawnCli(t, ['run', '--join', code, '--data-dir', peerDir, '--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--batch-size', '4', '--matchmaking-time', '2', '--threads', '1']);
    let ours: DatasetInfo | undefined;
    const { page, errors } = await joinFromDashboard(t, code, async (dir) => (ours = await prepareManyShards(dir, 1)));
    assert.ok(ours?.datasetId && theirs.datasetId && ours.datasetId !== theirs.datasetId, 'two datasets');
    assert.equal(ours.tokenizerHash, theirs.tokenizerHash, 'one tokenizer: the model has one shape, only the data differ');

    // the real peer sees the node's declaration and will not group with it, naming the node's data
    await waitFor(peer, new RegExp(`not averaging with \\S+: it trains on tokenizer sha256 ${ours.tokenizerHash}, dataset ${ours.datasetId}, this peer on tokenizer sha256 ${theirs.tokenizerHash}, dataset ${theirs.datasetId}`), 240_000, 'stderr');
    const alert = page.getByTestId('data-mismatch');
    await alert.waitFor({ timeout: 120_000 });
    const text = await alert.innerText();
    assert.match(text, /^This node trains on other data than the swarm, so it never averages with it\. no group formed: /);
    assert.ok(text.includes(`this peer trains on tokenizer sha256 ${ours.tokenizerHash}, dataset ${ours.datasetId}`), `the reason names this node's data: ${text}`);
    assert.ok(text.includes(`dataset ${theirs.datasetId}`), `the reason names the other peer's data: ${text}`);
    assert.ok(text.includes(`What to do: ${DATA_MISMATCH_ADVICE}`), `the advice: ${text}`);
    assert.equal(await page.getByRole('alert').filter({ hasText: 'other data than the swarm' }).count(), 1, 'shown as an alert');
    assert.deepEqual(errors, []);
  });
});
