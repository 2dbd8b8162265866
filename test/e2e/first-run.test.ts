// The first screen in headless Chromium says what an empty join code does on this node: join its default
// run (named), or train on this machine alone until a code is entered (and how to get one).
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { multiaddr } from '@multiformats/multiaddr';
import { encodeJoinCode } from '../../src/swarm/index.js';
import { skipWhenMissing } from '../helpers/skip.js';
import { chromiumMissing, cohortStartTraining, ensureRendererBuilt, launchBrowser, startNode } from './browser.js';

const skip = skipWhenMissing(chromiumMissing(), 'the browser first-screen test');

const WAIT = { timeout: 15_000 };
const PEER = '12D3KooWDhgHNEpmtGWPq3nXBZLSxAMwHF82uXYFP7tG3m3c8iGK';

describe('the first screen and the default run', { skip }, () => {
  before(ensureRendererBuilt);

  test('the first screen says plainly that Start trains alone when the node has no default run, and names the default run when it has one', async (t) => {
    const alone = await startNode(t, cohortStartTraining);
    const code = encodeJoinCode({ runId: 'public-albert', bootstrap: [multiaddr(`/ip4/203.0.113.5/tcp/31337/p2p/${PEER}`)] });
    // a default run through COHORT_INITIAL_PEERS, as a build's assets/default-swarm.json would give it
    const withDefault = await startNode(t, cohortStartTraining, { COHORT_INITIAL_PEERS: code });
    const page = await (await launchBrowser(t)).newPage();

    await page.goto(alone.url);
    await page.getByRole('heading', { name: 'Welcome to Cohort' }).waitFor(WAIT);
    const alonePara = (await page.locator('#first-alone').textContent(WAIT)) ?? '';
    assert.match(alonePara, /Without a join code, Start trains on this machine alone until you enter one .* To get a code, ask the coordinator of a swarm/s);
    // the coordinator switch is on the dashboard, not on this screen: the hint says how to get there
    assert.equal(await page.getByRole('switch').count(), 0);
    assert.match(alonePara, /start a swarm yourself: press Start, then turn on “Act as coordinator” in the dashboard's Coordinator mode panel/);
    assert.doesNotMatch((await page.locator('.first-run').textContent()) ?? '', /default swarm/);

    await page.goto(withDefault.url);
    await page.getByRole('heading', { name: 'Welcome to Cohort' }).waitFor(WAIT);
    assert.equal(await page.locator('#first-join-hint').textContent(WAIT), 'Leave it empty to join the default swarm “public-albert”, or paste a code a coordinator gave you.');
    assert.equal(await page.locator('#first-alone').count(), 0, 'no "alone" wording when there is a default run');
  });

});
