// The `run` record: a founder publishes the run's parameters, a joiner adopts those of its join
// code's peer (even when an earlier-dated conflicting record exists), malformed records are refused.
import assert from 'node:assert/strict';
import test from 'node:test';
import { z } from 'zod';
import { chooseRunParams, joinPeerIds, newRunParams, publishRunParams, readRunParams, resolveRunParams, RUN_KEY, RUN_NAMESPACE, runParamsRecords, runParamsSchema, type RunParams } from '../../src/collab/run-params.js';
import { DEFAULT_RUN_SETTINGS, defaultRunSettings, runSettingsProblem } from '../../src/collab/run-settings.js';
import { encodeCbor } from '../../src/swarm/cbor-message.js';
import type { RecordEntry } from '../../src/swarm/index.js';
import { capturingLogger } from '../helpers/log.js';
import { startNode, waitFor } from '../helpers/swarm.js';

const RUN = 'params-test';
/** A run's data pins (any two sha256s). */
const DATA = { datasetId: 'a'.repeat(64), tokenizerSha256: 'b'.repeat(64) };

test('a joiner adopts the record of its join code’s peer over an earlier-dated conflicting one; a malformed record is refused', { timeout: 60_000 }, async (t) => {
  const founder = await startNode(t, { runId: RUN });
  await waitFor('the founder to serve the DHT', () => !founder.clientMode);
  // a peer that publishes other parameters dated an hour before the founder's
  const early = await startNode(t, { runId: RUN, initialPeers: founder.multiaddrs(), reachability: 'public' });
  await early.ready;
  await waitFor('the founder and the early peer to see each other as servers', () => early.isClientMode(founder.peerId) === false && founder.isClientMode(early.peerId) === false);
  assert.equal(await readRunParams(early, { waitMs: 0 }), undefined, 'nothing published yet');
  assert.deepEqual(joinPeerIds(founder.multiaddrs()), [founder.peerId.toString()], 'the peer ids of --initial-peers');
  const founded = newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: 512, peakLr: 0.01 }, DATA);
  assert.equal((await publishRunParams(founder, founded)).replicas, 2, 'the founder and the early peer hold the founder’s record');
  const conflicting = newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: 64 }, DATA, founded.created - 3_600_000);
  assert.equal((await publishRunParams(early, conflicting)).replicas, 2);

  // a peer whose own schema lets anything through: the founder refuses its value
  const rogue = await startNode(t, { runId: RUN, initialPeers: founder.multiaddrs(), reachability: 'public' });
  await rogue.ready;
  await waitFor('the rogue peer to see the founder as a server', () => rogue.isClientMode(founder.peerId) === false);
  const loose = rogue.registerNamespace(RUN_NAMESPACE, z.record(z.string(), z.unknown()));
  const bad = await loose.store(RUN_KEY, '', { ...founded, preset: 'gigantic', created: 0 }, Date.now() + 60_000);
  assert.ok(
    bad.refused.some((r) => r.peer === founder.peerId.toString() && r.reason === 'schema'),
    `the founder must refuse the malformed value: ${JSON.stringify(bad.refused)}`,
  );

  const joiner = await startNode(t, { runId: RUN, initialPeers: founder.joinCode() });
  await joiner.ready;
  const { log, lines } = capturingLogger();
  const adopted = await readRunParams(joiner, { joinPeers: joinPeerIds(founder.joinCode()), log });
  assert.ok(adopted);
  assert.equal(adopted.owner, founder.peerId.toString());
  assert.equal(adopted.rule, 'join-peer');
  assert.deepEqual(adopted.params, founded);
  assert.deepEqual(
    adopted.conflicts.map((c) => [c.owner, c.params.targetBatchSize]),
    [[early.peerId.toString(), 64]],
  );
  const warning = lines.find((l) => l.includes('conflicting run parameters'));
  assert.ok(warning?.includes(early.peerId.toString()) && warning.includes(founder.peerId.toString()), `the conflict is logged with both owners: ${lines.join('\n')}`);

  // without a join peer to trust, the earliest created record wins (the documented limit)
  const earliest = await readRunParams(joiner, { waitMs: 0 });
  assert.equal(earliest?.owner, early.peerId.toString());
  assert.equal(earliest?.rule, 'earliest');

  // the rogue peer serves its malformed entry itself: a reader rejects it on validation
  await waitFor('the joiner to be answered by the rogue peer and reject its entry', async () => {
    const seen = await runParamsRecords(joiner).get(RUN_KEY);
    assert.ok(![...seen.values()].some((e) => e.owner === rogue.peerId.toString()), 'a malformed entry is never returned');
    return (joiner.stats().records.rejected.schema ?? 0) > 0;
  });
});

test('a joiner that finds no record and continues with the one its data directory keeps publishes it: a newcomer joining through it adopts the run', { timeout: 60_000 }, async (t) => {
  // the run's founder (its coordinator) is gone; a peer restarts with its join code and its stored record
  const gone = await startNode(t, { runId: RUN });
  const goneId = gone.peerId.toString();
  await gone.stop();
  const restarted = await startNode(t, { runId: RUN, reachability: 'public' });
  const stored = newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: 96 }, DATA, Date.now() - 3_600_000);
  const { log, lines } = capturingLogger();
  const resolved = await resolveRunParams(restarted, { own: DEFAULT_RUN_SETTINGS, joinPeers: [goneId], stored, log });
  assert.deepEqual(resolved, stored);
  assert.ok(lines.some((l) => l.includes('continuing with those this data directory keeps')), lines.join('\n'));

  const newcomer = await startNode(t, { runId: RUN, initialPeers: restarted.multiaddrs() });
  await newcomer.ready;
  const found = await readRunParams(newcomer, { joinPeers: [restarted.peerId.toString()] });
  assert.deepEqual([found?.owner, found?.params], [restarted.peerId.toString(), stored], 'the newcomer reads the run’s record from the restarted peer');
});

test('the run record schema rejects malformed and inconsistent values', () => {
  const good = newRunParams(DEFAULT_RUN_SETTINGS, DATA, 1000);
  assert.equal(runParamsSchema.safeParse(good).success, true);
  assert.equal(runParamsSchema.safeParse({ ...good, data: null }).success, true, 'a run may pin no data');
  const { gradAverager: _g, powersgdRank: _r, powersgdMinRatio: _p, outerOptimizer: _o, innerSteps: _h, outerLr: _ol, outerMomentum: _om, outerOverlap: _ov, ...plain } = good;
  assert.equal(runParamsSchema.safeParse(plain).success, true, 'a record of an earlier Cohort, without the averager and outer optimizer fields, means plain averaging');
  assert.equal(runParamsSchema.safeParse({ ...good, outerOptimizer: 'diloco', innerSteps: 5 }).success, true, 'a DiLoCo run');
  assert.equal(runParamsSchema.safeParse({ ...good, outerOptimizer: 'diloco', outerOverlap: true }).success, true, 'a DiLoCo run with the one-step-delayed outer update');
  assert.equal(runParamsSchema.safeParse({ ...good, outerOptimizer: 'diloco', innerBatchSize: 64 }).success, true, 'a DiLoCo run whose inner steps take 64 samples');
  assert.equal(runParamsSchema.safeParse({ ...good, outerOptimizer: 'diloco', gradCompression: 'blockwise4' }).success, true, 'a DiLoCo run whose pseudo-gradient goes in 4 bits');
  // every optional field set, at its longest
  const full = { ...good, outerOptimizer: 'diloco', innerSteps: 1_000_000, innerBatchSize: 10_000_000, outerOverlap: true, averageStateEvery: 1_000_000, aggregation: 'centered-clip', outerLr: 0.123456789, outerMomentum: 0.123456789 };
  assert.equal(runParamsSchema.safeParse(full).success, true, JSON.stringify(runParamsSchema.safeParse(full).error?.issues));
  assert.ok(encodeCbor(full).length <= 1024, `the record fits the namespace's 1 KiB: ${encodeCbor(full).length} bytes`);
  const { data: _data, adamBeta1: _b1, adamBeta2: _b2, adamEpsilon: _e, weightDecay: _w, clampValue: _c, maxGradNorm: _m, ...v1 } = good;
  const bad: Array<[string, unknown]> = [
    ['a version 1 record (no data, no LAMB recipe)', { ...v1, v: 1 }],
    ['another version', { ...good, v: 3 }],
    ['a tokenizer hash that is not a sha256', { ...good, data: { ...DATA, tokenizerSha256: 'abc' } }],
    ['a missing dataset id', { ...good, data: { tokenizerSha256: DATA.tokenizerSha256 } }],
    ['a β₁ of 1', { ...good, adamBeta1: 1 }],
    ['a negative weight decay', { ...good, weightDecay: -0.01 }],
    ['an infinite clamp value', { ...good, clampValue: Infinity }],
    ['a zero gradient clip', { ...good, maxGradNorm: 0 }],
    ['an unknown preset', { ...good, preset: 'gigantic' }],
    ['a sequence longer than the preset’s positions', { ...good, seqLen: 129 }],
    ['warmup not shorter than the schedule', { ...good, warmupSteps: 10, totalSteps: 10 }],
    ['a lead not under the target', { ...good, batchSizeLead: good.targetBatchSize }],
    ['an unknown compression', { ...good, gradCompression: 'zip' }],
    ['a zero learning rate', { ...good, peakLr: 0 }],
    ['an unknown gradient averager', { ...good, gradAverager: 'dgc' }],
    ['a PowerSGD rank of 0', { ...good, powersgdRank: 0 }],
    ['a PowerSGD min compression ratio of 1', { ...good, powersgdMinRatio: 1 }],
    ['an unknown outer optimizer', { ...good, outerOptimizer: 'adam' }],
    ['zero inner steps', { ...good, outerOptimizer: 'diloco', innerSteps: 0 }],
    ['a zero inner batch size', { ...good, outerOptimizer: 'diloco', innerBatchSize: 0 }],
    ['an inner batch size without DiLoCo', { ...good, innerBatchSize: 64 }],
    ['an outer momentum of 1', { ...good, outerMomentum: 1 }],
    ['DiLoCo with local updates', { ...good, outerOptimizer: 'diloco', useLocalUpdates: true }],
    ['DiLoCo with PowerSGD', { ...good, outerOptimizer: 'diloco', gradAverager: 'powersgd' }],
    ['the outer overlap without DiLoCo', { ...good, outerOverlap: true }],
    ['an unknown field', { ...good, extra: 1 }],
    ['a missing field', { ...good, seed: undefined }],
  ];
  for (const [what, value] of bad) assert.equal(runParamsSchema.safeParse(value).success, false, what);
});

test('without a join peer’s entry every peer picks the same one: earliest created, then the smaller owner id', () => {
  const entry = (owner: string, created: number, targetBatchSize: number): RecordEntry<RunParams> => ({
    owner,
    subkey: '',
    expiration: 0,
    value: newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize }, DATA, created),
  });
  const entries = [entry('peer-c', 2000, 32), entry('peer-b', 1000, 64), entry('peer-a', 1000, 128)];
  assert.equal(chooseRunParams(entries, [])?.owner, 'peer-a');
  assert.equal(chooseRunParams([...entries].reverse(), [])?.owner, 'peer-a');
  const viaJoin = chooseRunParams(entries, ['peer-c', 'someone-without-a-record']);
  assert.equal(viaJoin?.owner, 'peer-c');
  assert.deepEqual(viaJoin?.conflicts.map((c) => c.owner).sort(), ['peer-a', 'peer-b']);
  assert.equal(chooseRunParams([], ['peer-c']), undefined);
  // the same settings on other data is a conflict too
  const otherData = { owner: 'peer-d', subkey: '', expiration: 0, value: newRunParams({ ...DEFAULT_RUN_SETTINGS, targetBatchSize: 128 }, { ...DATA, tokenizerSha256: 'c'.repeat(64) }, 500) };
  assert.deepEqual(chooseRunParams([entries[2]!, otherData], ['peer-a'])?.conflicts.map((c) => c.owner), ['peer-d']);
});

test('the large preset runs hivemind’s ALBERT recipe unless a setting is given; the others keep the defaults', () => {
  const large = defaultRunSettings('large');
  assert.deepEqual(
    { seqLen: large.seqLen, targetBatchSize: large.targetBatchSize, peakLr: large.peakLr, warmupSteps: large.warmupSteps, totalSteps: large.totalSteps, betas: [large.adamBeta1, large.adamBeta2], eps: large.adamEpsilon, weightDecay: large.weightDecay, clampValue: large.clampValue, maxGradNorm: large.maxGradNorm, grad: large.gradCompression, state: large.stateAveragingCompression },
    { seqLen: 512, targetBatchSize: 4096, peakLr: 0.00176, warmupSteps: 5000, totalSteps: 125_000, betas: [0.9, 0.999], eps: 1e-6, weightDecay: 0.01, clampValue: 10_000, maxGradNorm: 1, grad: 'fp16', state: 'fp16' },
  );
  assert.equal(runSettingsProblem(large), undefined, 'the recipe is a valid record');
  assert.deepEqual(defaultRunSettings('tiny'), DEFAULT_RUN_SETTINGS);
  assert.deepEqual(runSettingsProblem({ ...large, adamBeta2: 1.5 })?.field, 'adamBeta2');
});
