// A joiner never trains on settings that are not the run's: it waits for the run record (reading it
// again with a doubling pause, logged), adopts it when it arrives late, and stops with an error
// saying what it tried when it never does.
import assert from 'node:assert/strict';
import test from 'node:test';
import { z } from 'zod';
import { RunRecordUnavailableError } from '../../src/collab/errors.js';
import { joinPeerIds, newRunParams, publishRunParams, resolveRunParams, RUN_KEY, RUN_NAMESPACE } from '../../src/collab/run-params.js';
import { DEFAULT_RUN_SETTINGS } from '../../src/collab/run-settings.js';
import { runCli } from '../helpers/cli.js';
import { capturingLogger } from '../helpers/log.js';
import { startNode, waitFor } from '../helpers/swarm.js';

/** The messages of JSON log lines. */
function messages(lines: readonly string[]): string[] {
  return lines.map((l) => String((JSON.parse(l) as { msg: unknown }).msg));
}

const OWN = { ...DEFAULT_RUN_SETTINGS, targetBatchSize: 4096 };

test('a joiner waits for a run record published late and adopts it, never its own settings', { timeout: 120_000 }, async (t) => {
  const founder = await startNode(t, { runId: 'record-late' });
  await waitFor('the founder to serve the DHT', () => !founder.clientMode);
  const joiner = await startNode(t, { runId: 'record-late', initialPeers: founder.joinCode() });
  await joiner.ready;
  const { log, lines } = capturingLogger();
  const run = newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: 640 }, null);
  // published after the joiner's first look (10 s) is over
  const publishing = new Promise((resolve) => setTimeout(resolve, 12_000)).then(() => publishRunParams(founder, run));
  const adopted = await resolveRunParams(joiner, { own: OWN, joinPeers: joinPeerIds(founder.joinCode()), recordWaitMs: 60_000, log });
  await publishing;
  assert.deepEqual(adopted, run, 'the run’s record, not this peer’s own settings');
  const said = messages(lines);
  assert.ok(said.some((m) => m.includes('no run record found yet in swarm "record-late"') && m.includes('DHT key "run"') && m.includes('looking again in')), `the wait is logged: ${said.join('\n')}`);
  assert.ok(said.some((m) => m.startsWith('adopting the swarm')), said.join('\n'));
});

test('a joiner that never finds the run record stops with an error saying what it tried, within its wait', { timeout: 120_000 }, async (t) => {
  const founder = await startNode(t, { runId: 'record-never' });
  await waitFor('the founder to serve the DHT', () => !founder.clientMode);
  const joiner = await startNode(t, { runId: 'record-never', initialPeers: founder.joinCode() });
  await joiner.ready;
  const { log } = capturingLogger();
  const started = Date.now();
  await assert.rejects(resolveRunParams(joiner, { own: OWN, joinPeers: joinPeerIds(founder.joinCode()), recordWaitMs: 15_000, log }), (err: Error) => {
    assert.ok(err instanceof RunRecordUnavailableError, String(err));
    assert.match(err.message, /could not read the run record \(DHT key "run"\) of swarm "record-never" in \d+ s \(\d+ look\(s\)\)/);
    assert.match(err.message, /connected to [1-9]\d* peer\(s\).*1 of the 1 join peer\(s\) among them/);
    assert.match(err.message, /found a run of your own/);
    return true;
  });
  // one look (10 s) and a pause beyond the 15 s wait are cut to it; a blocked read may add its own timeout
  assert.ok(Date.now() - started < 40_000, `gave up after ${Date.now() - started} ms`);
});

test('a joiner whose swarm publishes a run record of another version says so once and stops naming it, not only that it found none', { timeout: 120_000 }, async (t) => {
  const founder = await startNode(t, { runId: 'record-newer' });
  await waitFor('the founder to serve the DHT', () => !founder.clientMode);
  // a founder of a newer release: its schema is another version's (here: anything), it holds its own entry
  const newer = founder.registerNamespace(RUN_NAMESPACE, z.record(z.string(), z.unknown()));
  await newer.store(RUN_KEY, '', { ...newRunParams(DEFAULT_RUN_SETTINGS, null), v: 3 }, Date.now() + 600_000);
  const joiner = await startNode(t, { runId: 'record-newer', initialPeers: founder.joinCode() });
  await joiner.ready;
  const { log, lines } = capturingLogger();
  await assert.rejects(resolveRunParams(joiner, { own: OWN, joinPeers: joinPeerIds(founder.joinCode()), recordWaitMs: 5_000, log }), (err: Error) => {
    assert.ok(err instanceof RunRecordUnavailableError, String(err));
    assert.match(err.message, /the swarm publishes a run record this Cohort cannot read \(version 3 \(this Cohort reads version 2\)\): the run was founded by another Cohort release; if this peer's is older, update it/);
    return true;
  });
  const told = messages(lines).filter((m) => m.startsWith('the swarm publishes a run record this Cohort cannot read'));
  assert.equal(told.length, 1, `said once: ${messages(lines).join('\n')}`);
});

test('cohort status on a swarm whose run record is of another version says why it shows no run parameters', { timeout: 120_000 }, async (t) => {
  const founder = await startNode(t, { runId: 'record-newer-status' });
  await waitFor('the founder to serve the DHT', () => !founder.clientMode);
  const newer = founder.registerNamespace(RUN_NAMESPACE, z.record(z.string(), z.unknown()));
  await newer.store(RUN_KEY, '', { ...newRunParams(DEFAULT_RUN_SETTINGS, null), v: 3 }, Date.now() + 600_000);
  const why = /the swarm publishes a run record this Cohort cannot read \(version 3 \(this Cohort reads version 2\)\): the run was founded by another Cohort release; if this peer's is older, update it/;
  const text = await runCli(['status', '--join', founder.joinCode(), '--wait', '5', '--log-level', 'error'], { timeoutMs: 60_000 });
  assert.equal(text.code, 0, text.stderr);
  const line = text.stdout.split('\n').find((l) => l.startsWith('run parameters:'));
  assert.ok(line?.startsWith('run parameters: none readable: '), text.stdout);
  assert.match(line!, why);
  const json = await runCli(['status', '--join', founder.joinCode(), '--wait', '5', '--json', '--log-level', 'error'], { timeoutMs: 60_000 });
  assert.equal(json.code, 0, json.stderr);
  const view = JSON.parse(json.stdout) as { runParams: unknown; runParamsUnreadable: unknown };
  assert.equal(view.runParams, null);
  assert.match(String(view.runParamsUnreadable), why);
});
