// Joining from the dashboard in headless Chromium: the Settings join-code field validates a code, shows
// its swarm, saves it, and the node then trains with that swarm (a real coordinator process on loopback).
import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { spawnCli, waitFor } from '../collab/processes.js';
import { skipWhenMissing } from '../helpers/skip.js';
import { tmpDir } from '../helpers/tmp.js';
import { chromiumMissing, cohortStartTraining, ensureRendererBuilt, launchBrowser, startNode } from './browser.js';

const skip = skipWhenMissing(chromiumMissing(), 'the browser joining tests');

const WAIT = { timeout: 15_000 };
// the first Start prepares the bundled corpus before training
const TRAINING = { timeout: 180_000 };

describe('joining a swarm from the dashboard', { skip }, () => {
  before(ensureRendererBuilt);

  test('the Settings join-code field refuses a bad code with the reason, shows the swarm of a good one, saves it, and the node then trains with that swarm', { timeout: 300_000 }, async (t) => {
    const root = tmpDir(t);
    const co = spawnCli(t, ['run', '--coordinator', '--run-id', 'e2e-join', '--data-dir', path.join(root, 'co'), '--listen', '/ip4/127.0.0.1/tcp/0', '--refresh', '1', '--target-batch-size', '8']);
    const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 60_000);
    const node = await startNode(t, cohortStartTraining);
    const page = await (await launchBrowser(t)).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // past the first screen without starting (that would first train alone: minutes on a busy machine)
    assert.equal((await page.request.post(`${node.url}/api/updateSettings`, { data: { firstRunDone: true } })).status(), 200);
    await page.goto(node.url);

    const field = page.locator('#set-joinCode');
    const swarmLine = page.locator('#set-joinCode-swarm');
    await field.fill(code!.slice(0, -3));
    await swarmLine.filter({ hasText: 'join code checksum does not match: it was truncated or mistyped' }).waitFor(WAIT);
    assert.equal(await field.getAttribute('aria-invalid'), 'true');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.locator('.msg').filter({ hasText: /^settings rejected: join code checksum does not match/ }).waitFor(WAIT);

    await field.fill(code!);
    await swarmLine.filter({ hasText: /^Swarm “e2e-join” · 1 bootstrap peer$/ }).waitFor(WAIT);
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.locator('.msg').filter({ hasText: 'Settings saved: contribution uses the new swarm from now on.' }).waitFor(WAIT);
    await page.getByRole('button', { name: 'Start' }).click(WAIT);
    await page.getByRole('status').filter({ hasText: 'Contributing' }).waitFor(WAIT);

    // Start trains with the coordinator's swarm
    await page.locator('section:has(#log-title)').filter({ hasText: 'training with the swarm "e2e-join"' }).waitFor(TRAINING);
    await page.locator('section:has(#swarm-title) [data-reachability]:not([data-reachability="none"])').waitFor(TRAINING);
    // the coordinator records this node's steps: the swarm saw its samples
    await waitFor(co, /Step #\d+, loss \d+\.\d+ \([1-9]\d* peers/, 180_000, 'stderr');
    await page.reload();
    assert.equal(await page.locator('#set-joinCode').inputValue(WAIT), code, 'the code is stored');
    assert.deepEqual(errors, []);
  });
});
