// The dashboard in headless Chromium against a node that really trains: Start runs the engine on the
// bundled corpus, and every number on the page comes from that training, not from a fixture.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { skipWhenMissing } from '../helpers/skip.js';
import { ARTEFACTS, chromiumMissing, cohortStartTraining, ensureRendererBuilt, launchBrowser, startNode } from './browser.js';

const skip = skipWhenMissing(chromiumMissing(), 'the browser training test');

// the first Start prepares the bundled corpus (tokenizer, shards) before the first step
const TRAINING = { timeout: 180_000 };
const WAIT = { timeout: 15_000 };

const mySamples = (page: Page): Promise<number> =>
  page.locator('section:has(#mine-title) dt:text-is("Samples") + dd').textContent(WAIT).then((t) => Number((t ?? '').replace(/,/g, '')));

describe('dashboard of a node that trains', { skip }, () => {
  before(async () => {
    await ensureRendererBuilt();
    fs.mkdirSync(ARTEFACTS, { recursive: true });
  });

  test('Start trains for real: samples grow, the loss chart draws real losses; the coordinator switch shows a real join code and the node\'s reachability', async (t) => {
    const node = await startNode(t, cohortStartTraining);
    const page = await (await launchBrowser(t)).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(node.url);
    await page.getByRole('button', { name: 'Start' }).click(WAIT);
    await page.getByRole('status').filter({ hasText: 'Contributing' }).waitFor(WAIT);
    assert.doesNotMatch((await page.locator('header').textContent()) ?? '', /nothing is computed/, 'this node has an engine attached');

    // samples appear, then grow without a reload
    await page.waitForFunction(() => Number(document.querySelector('section:has(#mine-title) dd')?.textContent?.replace(/,/g, '')) > 0, undefined, TRAINING);
    const first = await mySamples(page);
    await page.waitForFunction((n) => Number(document.querySelector('section:has(#mine-title) dd')?.textContent?.replace(/,/g, '')) > n, first, TRAINING);

    // the loss chart holds several real points: finite, positive, near ln(vocab) at the start
    const chart = page.locator('figure:has(#loss-chart-title)');
    await page.waitForFunction(() => Number(document.querySelector('figure:has(#loss-chart-title) [data-points]')?.getAttribute('data-points')) >= 3, undefined, TRAINING);
    const label = (await chart.locator('[data-points]').getAttribute('aria-label')) ?? '';
    const latest = Number(/latest ([\d.]+)/.exec(label)?.[1]);
    assert.ok(Number.isFinite(latest) && latest > 0 && latest < 30, `a plausible MLM+SOP loss is drawn (${label})`);
    const inked = await chart.locator('canvas').evaluate((c: HTMLCanvasElement) => {
      const pixels = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i]! > 0) n++;
      return n;
    });
    assert.ok(inked > 1000, `the loss chart drew something (${inked} inked pixels)`);
    await page.screenshot({ path: path.join(ARTEFACTS, 'dashboard-training.png'), fullPage: true });

    // training alone: this node is in no swarm yet
    const reach = page.locator('section:has(#swarm-title) [data-reachability]');
    assert.equal(await reach.getAttribute('data-reachability', WAIT), 'none');
    assert.match((await reach.textContent()) ?? '', /not in a swarm/);

    // the coordinator role of the same node: the join code is a real one, for this node's swarm
    const toggle = page.getByRole('switch', { name: 'Act as coordinator' });
    await toggle.click(WAIT);
    await page.locator('[role="switch"][aria-checked="true"]').waitFor(TRAINING);
    const code = await page.getByLabel('Join code to share').inputValue(WAIT);
    assert.match(code, /^cohort:/, `a join code to share (${code.slice(0, 40)}…)`);
    const modules = await page.getByRole('img', { name: 'QR code of the join code' }).locator('path').getAttribute('d');
    assert.ok((modules?.match(/M/g) ?? []).length > 100, 'the QR code has modules drawn');
    // the node that starts a swarm is its bootstrap: it serves the DHT (the swarm node's own verdict)
    await page.locator('section:has(#swarm-title) [data-reachability="public"]').waitFor(TRAINING);
    assert.match((await reach.textContent()) ?? '', /reachability: public — serving the DHT/);
    await page.locator('section:has(#coord-title)').screenshot({ path: path.join(ARTEFACTS, 'coordinator-training.png') });
    assert.deepEqual(errors, [], 'no page errors');
  });
});
