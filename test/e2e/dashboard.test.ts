// The dashboard in real headless Chromium (Debian's chromium, driven by playwright-core) against a
// real headless node. Screenshots land in test-results/ as artefacts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { METRIC } from '../../src/store/metric-series.js';
import { OTHER_RELEASE_NOTICE } from '../../src/util/notices.js';
import { openStore } from '../../src/store/index.js';
import { ROOT } from '../helpers/cli.js';
import { skipWhenMissing } from '../helpers/skip.js';
import { ARTEFACTS, chromiumMissing, ensureRendererBuilt, feedMetrics, launchBrowser, startNode } from './browser.js';

const skip = skipWhenMissing(chromiumMissing(), 'the browser tests');

const WAIT = { timeout: 15_000 };

async function samplesOnPage(page: Page): Promise<number> {
  const text = await page.locator('section:has(#mine-title) dt:text-is("Samples") + dd').textContent(WAIT);
  return Number((text ?? '').replace(/,/g, ''));
}

describe('dashboard in headless Chromium', { skip }, () => {
  before(async () => {
    await ensureRendererBuilt();
    fs.mkdirSync(ARTEFACTS, { recursive: true });
  });

  test('first run: Start (by keyboard) begins contributing, live samples grow, the loss chart draws', async (t) => {
    const node = await startNode(t);
    await feedMetrics(node.dataDir, 0);
    const page = await (await launchBrowser(t)).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(node.url);
    await page.getByRole('heading', { name: 'Welcome to Cohort' }).waitFor(WAIT);
    await page.screenshot({ path: path.join(ARTEFACTS, 'first-run.png') });

    await page.getByLabel('Join code').focus();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent?.trim()), 'Start', 'Start is the next stop after the join code');
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: 'Contributing' }).waitFor(WAIT);
    assert.match((await page.locator('header').textContent()) ?? '', /nothing is computed: training is off/, 'the page says honestly that nothing trains here');

    const before = await samplesOnPage(page);
    assert.ok(before > 0, `samples shown (${before})`);
    const layout = () => page.evaluate(() => [...document.querySelectorAll('header, main section, main dd')].map((e) => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height].join(','); }));
    const layoutBefore = await layout();
    const feeding = feedMetrics(node.dataDir, 12);
    await page.waitForFunction((n) => Number(document.querySelector('section:has(#mine-title) dd')?.textContent?.replace(/,/g, '')) > n, before, WAIT);
    await feeding;
    assert.ok((await samplesOnPage(page)) > before, 'samples grew on the page without a reload');
    assert.deepEqual(await layout(), layoutBefore, 'no layout jumps while the numbers update');

    const chart = page.locator('figure:has(#loss-chart-title)');
    await chart.locator('[data-points="80"]').waitFor(WAIT);
    const inked = await chart.locator('canvas').evaluate((c: HTMLCanvasElement) => {
      const pixels = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i]! > 0) n++;
      return { n, width: c.width, height: c.height };
    });
    assert.ok(inked.width > 100 && inked.height > 100, `canvas has a size (${inked.width}×${inked.height})`);
    assert.ok(inked.n > 1000, `the loss chart drew something (${inked.n} inked pixels)`);
    await page.screenshot({ path: path.join(ARTEFACTS, 'dashboard.png'), fullPage: true });
    assert.deepEqual(errors, [], 'no page errors');
  });

  test("steps under a second apart: the charts' time axis ticks whole seconds, never \":34.200\"", async (t) => {
    const node = await startNode(t);
    const store = openStore(node.dataDir);
    const now = Date.now();
    store.metrics.record(Array.from({ length: 8 }, (_, i) => ({ series: METRIC.loss, value: 3 - i * 0.1, ts: now - 1600 + i * 200, epoch: i })));
    store.close();
    const page = await (await launchBrowser(t)).newPage();
    // uPlot draws its tick labels on the canvas: record what it writes
    await page.addInitScript(() => {
      const drawn: string[] = [];
      (window as unknown as { drawn: string[] }).drawn = drawn;
      const proto = CanvasRenderingContext2D.prototype;
      const fillText = Object.getOwnPropertyDescriptor(proto, 'fillText')!.value as CanvasRenderingContext2D['fillText'];
      proto.fillText = function (this: CanvasRenderingContext2D, ...args: Parameters<CanvasRenderingContext2D['fillText']>) {
        drawn.push(args[0]);
        Reflect.apply(fillText, this, args);
      };
    });
    await page.goto(node.url);
    await page.getByRole('button', { name: 'Start' }).click(WAIT);
    await page.locator('figure:has(#loss-chart-title) [data-points="8"]').waitFor(WAIT);
    const drawn = await page.evaluate(() => (window as unknown as { drawn: string[] }).drawn);
    assert.ok(drawn.some((text) => /\d:\d\d/.test(text)), `a time tick is drawn (${drawn.join(' | ')})`);
    assert.deepEqual(drawn.filter((text) => /\.\d{3}$/.test(text)), [], 'no sub-second tick');
  });

  test('settings persist across a reload', async (t) => {
    const node = await startNode(t);
    const page = await (await launchBrowser(t)).newPage();
    await page.goto(node.url);
    await page.getByRole('button', { name: 'Start' }).click(WAIT);
    await page.getByRole('heading', { name: 'Settings' }).waitFor(WAIT);
    await page.getByLabel('CPU threads').fill('7');
    await page.getByLabel('Pause while on battery').uncheck();
    await page.getByLabel('Bandwidth cap (KiB/s)').fill('512');
    await page.getByLabel('Precision').selectOption('fp16');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Settings saved.').waitFor(WAIT);

    await page.getByLabel('Memory limit (MiB)').fill('100');
    assert.match((await page.locator('#set-maxMemoryMiB-hint').textContent()) ?? '', /512/, 'a bad value is explained next to its field');
    assert.equal(await page.getByRole('button', { name: 'Save settings' }).isDisabled(), true);

    await page.reload();
    await page.getByLabel('CPU threads').waitFor(WAIT);
    assert.equal(await page.getByLabel('CPU threads').inputValue(), '7');
    assert.equal(await page.getByLabel('Bandwidth cap (KiB/s)').inputValue(), '512');
    assert.equal(await page.getByLabel('Precision').inputValue(), 'fp16');
    assert.equal(await page.getByLabel('Pause while on battery').isChecked(), false);
    assert.equal(await page.getByLabel('Memory limit (MiB)').inputValue(), '4096', 'the unsaved bad value was not stored');
  });

  test('the log panel keeps its newest line in view as lines arrive, unless the volunteer scrolled up to read', async (t) => {
    const node = await startNode(t);
    // each saved display name logs one line ("settings changed: displayName")
    const logLines = async (from: number, n: number): Promise<void> => {
      for (let i = from; i < from + n; i++) assert.equal((await fetch(`${node.url}/api/updateSettings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ firstRunDone: true, displayName: `v${i}` }) })).status, 200);
    };
    await logLines(0, 30);
    const page = await (await launchBrowser(t)).newPage();
    await page.goto(node.url);
    const log = page.getByRole('log');
    const lines = log.locator('.line');
    /** Pixels of the log hidden below its visible part. */
    const below = () => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
    await page.waitForFunction(() => document.querySelectorAll('[role=log] .line').length >= 30, undefined, WAIT);
    assert.ok((await log.evaluate((el) => el.scrollHeight - el.clientHeight)) > 100, 'the lines overflow the panel');
    assert.ok((await below()) < 2, `the newest line is in view on load (${await below()} px below)`);

    const count = await lines.count();
    await logLines(30, 5);
    await page.waitForFunction((n) => document.querySelectorAll('[role=log] .line').length >= n + 5, count, WAIT);
    assert.ok((await below()) < 2, `the newest line stays in view as lines arrive (${await below()} px below)`);

    // scrolled up to read: new lines do not pull the view away
    await log.evaluate((el) => (el.scrollTop = 0));
    await logLines(35, 5);
    await page.waitForFunction((n) => document.querySelectorAll('[role=log] .line').length >= n + 10, count, WAIT);
    assert.equal(await log.evaluate((el) => el.scrollTop), 0);
  });

  test('the coordinator toggle says why it is unavailable without the swarm; a lost node is announced (dark mode)', async (t) => {
    const node = await startNode(t);
    await feedMetrics(node.dataDir, 0);
    const page = await (await launchBrowser(t, 'dark')).newPage();
    await page.goto(node.url);
    await page.getByRole('button', { name: 'Start' }).click(WAIT);
    const toggle = page.getByRole('switch', { name: 'Act as coordinator' });
    await toggle.waitFor(WAIT);
    assert.equal(await toggle.getAttribute('aria-checked'), 'false');
    // the swarm is not part of this version: the node reports the role unavailable and the page says why
    assert.equal(await toggle.isDisabled(), true);
    await page.getByText('Unavailable: coordinator mode needs the swarm').waitFor(WAIT);
    assert.match((await page.locator('#coord-explain').textContent()) ?? '', /join code to share/);
    await page.screenshot({ path: path.join(ARTEFACTS, 'dashboard-dark.png'), fullPage: true });

    // the node goes away: the page says so instead of showing stale numbers as live
    const exited = new Promise((resolve) => node.child.once('exit', resolve));
    node.child.kill('SIGTERM');
    await exited;
    await page.getByText('Lost the connection to the Cohort node').waitFor(WAIT);
  });

  test('with a coordinator role, the switch turns it on and shows the join code as text and QR code; the swarm presence shows reachability and the leaderboard', async (t) => {
    const joinCode = 'cohort-test-join-code-7Hq2ZkR9';
    const fixture = path.join(ROOT, 'test', 'fixtures', 'node-with-test-coordinator.ts');
    const node = await startNode(t, (dataDir) => ['--import', 'tsx', fixture, dataDir, joinCode]);
    const page = await (await launchBrowser(t)).newPage();
    await page.goto(node.url);
    await page.getByRole('button', { name: 'Start' }).click(WAIT);
    const toggle = page.getByRole('switch', { name: 'Act as coordinator' });
    await toggle.focus(WAIT);
    await page.keyboard.press('Space');
    await page.locator('[role="switch"][aria-checked="true"]').waitFor(WAIT);
    assert.equal(await page.getByLabel('Join code to share').inputValue(), joinCode);
    await page.getByRole('log').getByText(`test coordinator up; join code ${joinCode}`).waitFor(WAIT); // the role's own log line reaches the panel
    const qr = page.getByRole('img', { name: 'QR code of the join code' });
    const modules = await qr.locator('path').getAttribute('d');
    assert.ok((modules?.match(/M/g) ?? []).length > 100, 'the QR code has modules drawn');
    await page.locator('section:has(#coord-title)').screenshot({ path: path.join(ARTEFACTS, 'coordinator.png') });

    // the node's swarm presence: its reachability, and the coordinator's leaderboard with this volunteer's row
    assert.match((await page.locator('section:has(#swarm-title) [data-reachability="private"]').textContent(WAIT)) ?? '', /private — reachable through relays/);
    const mine = page.locator('section:has(#mine-title)');
    const rows = await mine.locator('tbody tr').allTextContents();
    assert.equal(rows.length, 3, `three contributors listed: ${rows.join(' | ')}`);
    assert.match(rows[0]!, /1\s*alice\s*600\s*2\.00\s*54\.5 %/);
    assert.match(rows[1]!, /2\s*12D3KooWTestVolunteer \(you\)\s*400\s*1\.50\s*36\.4 %/);
    assert.equal(await mine.locator('tr[aria-current="true"]').count(), 1, 'this volunteer\'s row is marked');
    assert.equal(await mine.locator('dt:text-is("Rank") + dd').textContent(), '#2 of 3', 'the rank the coordinator credited');
    assert.equal(await mine.locator('dt:text-is("Share of the run") + dd').textContent(), '36.4 %');
    await mine.screenshot({ path: path.join(ARTEFACTS, 'leaderboard.png') });
    // the presence met a peer of another release: the dashboard says so, and what to do, not the log alone
    assert.equal(await page.getByTestId('notice-other-release').textContent(WAIT), OTHER_RELEASE_NOTICE.text);
    await toggle.click();
    await page.locator('[role="switch"][aria-checked="false"]').waitFor(WAIT);
    assert.equal(await page.getByLabel('Join code to share').count(), 0, 'the join code goes away with the role');
  });
});
