import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { test } from 'node:test';
import { MATCHMAKING_PROTOCOL, MAX_CONTROL_BYTES } from '../../src/averaging/constants.js';
import { FramedStream } from '../../src/averaging/framing.js';
import { schemaHash } from '../../src/averaging/group.js';
import { AveragingHub } from '../../src/averaging/hub.js';
import { joinResponseSchema, type JoinRequest, type JoinResponse } from '../../src/averaging/messages.js';
import { ROOT } from '../helpers/cli.js';
import { warningLog } from '../helpers/log.js';
import { startNode, startSwarm, waitFor } from '../helpers/swarm.js';
import { averagers, FAST, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

test('a lone peer fails cleanly and says what it saw', async (t) => {
  const [node] = await startSwarm(t, 1, { runId: 'mm-alone' });
  const [avg] = averagers(t, [node!], () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 1000, minGroupSize: 2 }));
  const started = Date.now();
  const result = await avg!.step(new Float32Array(10), { epoch: 7, weight: 1 });
  assert.ok(Date.now() - started < 3000, 'fails soon after the matchmaking time');
  assert.equal(result.ok, false);
  assert.ok(!result.ok && result.stage === 'matchmaking' && result.code === 'NO_GROUP');
  assert.match(result.ok ? '' : result.reason, /only 1 of min 2 peers declared under key averaging\/grad:7 within 1\.\d s/);
});

test('groups never mix epochs or tensor schemas', async (t) => {
  const nodes = await startSwarm(t, 5, { runId: 'mm-mix' });
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 6000, averagingExpirationMs: 9000, targetGroupSize: 4, minGroupSize: 2 }));
  // peers 0,1 at epoch 1; peers 2,3 at epoch 2; peer 4 at epoch 2 with another vector length
  const epochs = [1, 1, 2, 2, 2];
  const sizes = [100, 100, 100, 100, 101];
  const results = await Promise.all(avg.map((a, i) => a.step(randomVector(sizes[i]!, i + 1), { epoch: epochs[i]!, weight: 1 })));
  const ids = (i: number): string[] => {
    const r = results[i]!;
    assert.ok(r.ok, r.ok ? '' : r.reason);
    return r.group.members.map((m) => m.peer).sort();
  };
  const peers = nodes.map((n) => n.peerId.toString());
  assert.deepEqual(ids(0), [peers[0], peers[1]].sort());
  assert.deepEqual(ids(2), [peers[2], peers[3]].sort());
  assert.ok(results[0]!.ok && results[0]!.group.key === 'averaging/grad:1');
  // the odd peer is told that the others average another schema, naming both, not that nobody came
  const odd = results[4]!;
  assert.ok(!odd.ok && odd.code === 'BAD_SCHEMA_HASH', odd.ok ? 'grouped' : `${odd.code}: ${odd.reason}`);
  assert.ok(odd.reason.includes(schemaHash(100).slice(0, 12)) && odd.reason.includes(schemaHash(101).slice(0, 12)) && odd.reason.includes('Cohort release'), odd.reason);
});

test('peers of another Cohort release are named once per node, not every round: another schema fails with BAD_SCHEMA_HASH, a peer without this matchmaking version is not asked again', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'mm-release' });
  const logs = nodes.map(() => warningLog());
  const avg = averagers(t, nodes.slice(0, 2), (i) => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 3000, averagingExpirationMs: 5000, log: logs[i]!.log }));
  // node 1 is a release whose PowerSGD (or model) hashes its layout differently; node 2 one whose
  // matchmaking protocol has another version: it declares the same schema but answers no matchmaking/5.0.0 dial
  const oldRelease = nodes[2]!;
  await oldRelease.handle('matchmaking/4.0.0', (stream) => void stream.close());
  const oldDeclarations = AveragingHub.of(oldRelease).groups;
  const peers = nodes.map((n) => n.peerId.toString());
  for (const epoch of [0, 1]) {
    const key = `averaging/grad:${epoch}`;
    await oldDeclarations.store(key, '', { bandwidth: 1e6, clientMode: false, schema: schemaHash(100), data: null }, Date.now() + 5000);
    await waitFor('the old release’s declaration to be readable', async () => (await oldDeclarations.get(key)).size > 0);
    const [current, other] = await Promise.all([avg[0]!.step(randomVector(100, 1), { epoch, weight: 1 }), avg[1]!.step(randomVector(100, 2), { epoch, weight: 1, schema: schemaHash(101) })]);
    assert.ok(!current.ok && current.code === 'BAD_SCHEMA_HASH', current.ok ? 'grouped' : `${current.code}: ${current.reason}`);
    assert.ok(current.reason.includes(schemaHash(101).slice(0, 12)) && current.reason.includes(`do not speak ${MATCHMAKING_PROTOCOL}`), current.reason);
    assert.ok(!other.ok && other.code === 'BAD_SCHEMA_HASH' && other.reason.includes(schemaHash(100).slice(0, 12)), other.ok ? 'grouped' : other.reason);
  }
  // one line per peer and difference over both rounds, naming the peer and what to do
  const notices = (i: number, peer: string): string[] => logs[i]!.warnings.filter((w) => w.startsWith(`not averaging with ${peer}`));
  assert.equal(notices(0, peers[1]!).length, 1, logs[0]!.warnings.join('\n'));
  assert.match(notices(0, peers[1]!)[0]!, /tensor schema .* update it/);
  assert.equal(notices(0, peers[2]!).length, 1, logs[0]!.warnings.join('\n'));
  assert.match(notices(0, peers[2]!)[0]!, new RegExp(`does not speak ${MATCHMAKING_PROTOCOL}: it runs another Cohort release`));
  assert.equal(notices(1, peers[0]!).length, 1, logs[1]!.warnings.join('\n'));
  // the dashboard's notices: one per kind, not per peer
  assert.deepEqual(nodes[0]!.notices.shown().map((n) => n.kind).sort(), ['other-release', 'other-schema']);
  // node 1 may also see node 2's extra protocol version in an identify push (timing): other-release is right there too
  assert.ok(nodes[1]!.notices.shown().some((n) => n.kind === 'other-schema'), JSON.stringify(nodes[1]!.notices.shown()));
});

test('a peer on other data is named once per node, not every round', async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'mm-data-once' });
  const runData = { datasetId: 'a'.repeat(64), tokenizerSha256: 'b'.repeat(64) };
  const otherTokenizer = { ...runData, tokenizerSha256: 'c'.repeat(64) };
  const log = warningLog();
  const [avg] = averagers(t, nodes.slice(0, 1), () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 1500, averagingExpirationMs: 5000, data: runData, log: log.log }));
  const declarations = AveragingHub.of(nodes[1]!).groups;
  const other = nodes[1]!.peerId.toString();
  for (const epoch of [0, 1]) {
    const key = `averaging/grad:${epoch}`;
    await declarations.store(key, '', { bandwidth: 1e6, clientMode: false, schema: schemaHash(100), data: otherTokenizer }, Date.now() + 5000);
    await waitFor('the other peer’s declaration to be readable', async () => (await declarations.get(key)).size > 0);
    const result = await avg!.step(randomVector(100, 1), { epoch, weight: 1 });
    assert.ok(!result.ok && result.code === 'DATA_MISMATCH', result.ok ? 'grouped' : `${result.code}: ${result.reason}`);
  }
  const notices = log.warnings.filter((w) => w.startsWith(`not averaging with ${other}: it trains on`));
  assert.equal(notices.length, 1, log.warnings.join('\n'));
  assert.ok(notices[0]!.includes('b'.repeat(64)) && notices[0]!.includes('c'.repeat(64)), notices[0]);
});

test('target group size: the leader closes a full group and refuses the rest with GROUP_IS_FULL or ALREADY_RUNNING', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'mm-full' });
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 2000, targetGroupSize: 2, minGroupSize: 2 }));
  const results = await Promise.all(avg.map((a, i) => a.step(randomVector(50, i + 1), { epoch: 0, weight: 1 })));
  const grouped = results.filter((r) => r.ok);
  assert.equal(grouped.length, 2);
  const left = results.find((r) => !r.ok);
  assert.ok(left && !left.ok);
  assert.match(left.reason, /GROUP_IS_FULL|ALREADY_RUNNING/);
});

test('a peer that ends its epoch after the others averaged it fails at once instead of waiting out the matchmaking time', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'mm-late' });
  const avg = averagers(t, nodes, () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 20_000, averagingExpirationMs: 30_000, minGroupSize: 2 }));
  const early = await Promise.all(avg.slice(0, 2).map((a, i) => a.step(randomVector(50, i + 1), { epoch: 3, weight: 1, expectedPeers: 2 })));
  assert.ok(early.every((r) => r.ok), JSON.stringify(early.map((r) => (r.ok ? 'ok' : r.reason))));
  const started = Date.now();
  const late = await avg[2]!.step(randomVector(50, 3), { epoch: 3, weight: 1 });
  assert.ok(!late.ok && late.code === 'NO_GROUP', late.ok ? 'grouped' : late.reason);
  assert.match(late.reason, /all 2 other peers declared under key averaging\/grad:3 already closed their groups or moved on/);
  assert.ok(Date.now() - started < 10_000, `waited ${Date.now() - started} ms of a 20 s matchmaking time`);
  // a peer that is merely later than the leader (its group still open) still joins it
  const [lead, follow] = await Promise.all([avg[0]!.step(randomVector(50, 4), { epoch: 4, weight: 1, expectedPeers: 2 }), delay(1000).then(() => avg[2]!.step(randomVector(50, 5), { epoch: 4, weight: 1, expectedPeers: 2 }))]);
  assert.ok(lead.ok && follow.ok, `${lead.ok ? '' : lead.reason} ${follow.ok ? '' : follow.reason}`);
});

test('a latecomer, server or client-mode, left behind by a group with client-mode members fails at once', async (t) => {
  const servers = await startSwarm(t, 3, { runId: 'mm-late-client' });
  const clients = await Promise.all([0, 1].map(() => startNode(t, { runId: 'mm-late-client', clientMode: true, listen: [], initialPeers: servers[0]!.multiaddrs() })));
  await Promise.all(clients.map((n) => n.ready));
  // servers 0 and 1 and client 3 average; server 2 and client 4 come after
  const [s0, s1, lateServer, c3, lateClient] = averagers(t, [...servers, ...clients], () => ({ prefix: 'grad', ...FAST, matchmakingTimeMs: 20_000, averagingExpirationMs: 30_000, minGroupSize: 2 }));
  const early = await Promise.all([s0!, s1!, c3!].map((a, i) => a.step(randomVector(50, i + 1), { epoch: 3, weight: 1, expectedPeers: 3 })));
  assert.ok(early.every((r) => r.ok && r.group.members.length === 3), JSON.stringify(early.map((r) => (r.ok ? r.group.members.length : r.reason))));
  // each would wait out the 20 s without its rule: the client-mode peer for the other client-mode
  // peer's refusal (nobody asks a peer that cannot lead), the server for a client-mode peer to follow it
  for (const [who, avg] of [['the client-mode latecomer', lateClient!], ['the server latecomer', lateServer!]] as const) {
    const started = Date.now();
    const late = await avg.step(randomVector(50, 4), { epoch: 3, weight: 1 });
    assert.ok(!late.ok && late.code === 'NO_GROUP', `${who}: ${late.ok ? 'grouped' : late.reason}`);
    assert.match(late.reason, /already closed their groups or moved on/, who);
    assert.ok(Date.now() - started < 10_000, `${who} waited ${Date.now() - started} ms of a 20 s matchmaking time`);
  }
});

test('late peers (the swarm stepped past their round) with nobody left to group with give up at once; a late server still gathers late client-mode peers', async (t) => {
  const servers = await startSwarm(t, 3, { runId: 'mm-lagging' });
  const clients = await Promise.all([0, 1].map(() => startNode(t, { runId: 'mm-lagging', clientMode: true, listen: [], initialPeers: servers[0]!.multiaddrs() })));
  await Promise.all(clients.map((n) => n.ready));
  // the on-time pair's declarations live 2 s; the latecomers would wait 20 s for a group
  const [s0, s1, lateServer, c3, c4] = averagers(t, [...servers, ...clients], (i) => ({ prefix: 'grad', ...FAST, ...(i < 2 ? { matchmakingTimeMs: 1500, averagingExpirationMs: 2000 } : { matchmakingTimeMs: 20_000, averagingExpirationMs: 30_000 }), minGroupSize: 2 }));
  const onTime = await Promise.all([s0!, s1!].map((a, i) => a.step(randomVector(50, i + 1), { epoch: 3, weight: 1, expectedPeers: 2 })));
  assert.ok(onTime.every((r) => r.ok), JSON.stringify(onTime.map((r) => (r.ok ? 'ok' : r.reason))));
  await delay(2500); // their declarations have expired
  // two client-mode latecomers: neither can lead, so there is nobody either could group with (in the
  // swarm lab such peers waited out every round's matchmaking time and were late for the next, for minutes)
  let started = Date.now();
  const lagging = await Promise.all([c3!, c4!].map((a, i) => a.step(randomVector(50, 3 + i), { epoch: 3, weight: 1, late: true })));
  for (const r of lagging) {
    assert.ok(!r.ok && r.code === 'NO_GROUP', r.ok ? 'grouped' : r.reason);
    assert.match(r.reason, /the swarm stepped past this round and none of the \d+ other peer\(s\) declared under key averaging\/grad:3 could group with this one \(a client-mode peer can only follow a server peer\)/);
  }
  assert.ok(Date.now() - started < 10_000, `the client-mode latecomers waited ${Date.now() - started} ms of a 20 s matchmaking time`);
  // a late server and a late client-mode peer of the next round find each other: the server leads
  const [led, followed] = await Promise.all([lateServer!.step(randomVector(50, 5), { epoch: 4, weight: 1, expectedPeers: 2, late: true }), c3!.step(randomVector(50, 6), { epoch: 4, weight: 1, expectedPeers: 2, late: true })]);
  assert.ok(led.ok && followed.ok, `${led.ok ? '' : led.reason} ${followed.ok ? '' : followed.reason}`);
  assert.deepEqual(led.group.members.map((m) => m.peer).sort(), [servers[2]!.peerId.toString(), clients[0]!.peerId.toString()].sort());
  // a late server alone gives up as quickly
  started = Date.now();
  const alone = await lateServer!.step(randomVector(50, 7), { epoch: 5, weight: 1, late: true });
  assert.ok(!alone.ok && /the swarm stepped past this round and none of the 0 other peer\(s\)/.test(alone.reason), alone.ok ? 'grouped' : alone.reason);
  assert.ok(Date.now() - started < 10_000, `the late server alone waited ${Date.now() - started} ms`);
});

interface Child {
  readonly peer: string;
  readonly lines: AsyncIterator<string>;
  send(line: unknown): void;
  kill(): void;
}

async function startChild(t: import('node:test').TestContext, config: unknown): Promise<Child> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/averaging-peer.ts', JSON.stringify(config)], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => proc.kill('SIGKILL'));
  const lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  const { peer } = JSON.parse(String(first.value)) as { peer: string };
  return { peer, lines, send: (line) => proc.stdin.write(JSON.stringify(line) + '\n'), kill: () => proc.kill('SIGKILL') };
}

test('a peer killed with SIGKILL mid-round: the others finish without it, and the next round succeeds', async (t) => {
  const runId = 'mm-kill';
  const nodes = await startSwarm(t, 2, { runId });
  // long sender timeout: the survivors must notice the dead connection, not wait for a timeout
  // room for the child (its own process) to join under load; a full group closes at once anyway
  const init = { prefix: 'grad', ...FAST, matchmakingTimeMs: 10_000, averagingExpirationMs: 15_000, senderTimeoutMs: 30_000, reducerTimeoutMs: 30_000, averagingTimeoutMs: 30_000, targetGroupSize: 3, chunkValues: 100 };
  const child = await startChild(t, { runId, initialPeers: nodes[0]!.multiaddrs(), averager: { ...init, fault: 'stall-sending' } });
  // the child turned DHT server (AutoNAT) just before it said so: wait until identify-push told the others
  await waitFor('the servers to know the child serves', () => nodes.every((node) => node.isClientMode(child.peer) !== true));
  const grouped = [false, false];
  const avg = averagers(t, nodes, (i) => ({ ...init, onEvent: (e) => void (e.type === 'group' && (grouped[i] = true)) }));
  const n = 3000;
  const vectors = [randomVector(n, 1), randomVector(n, 2)];
  child.send({ epoch: 0, weight: 1, n, seed: 3 });
  const started = Date.now();
  const steps = avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: i + 1 }));
  for (;;) {
    const line = await child.lines.next();
    assert.ok(!line.done, 'child exited before forming a group');
    if ((JSON.parse(line.value) as { type?: string }).type === 'group') break;
  }
  // mid-round: once every member holds the group description (a leader killed before its followers
  // read it only fails their matchmaking), and the child, stalling, keeps the round from finishing
  await waitFor('the survivors to receive the group description', () => grouped.every(Boolean));
  child.kill();
  const results = await Promise.all(steps);
  assert.ok(Date.now() - started < 15_000, 'the survivors did not wait for the 30 s timeouts');
  for (const [i, r] of results.entries()) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.group.members.length, 3);
    assert.equal(r.status, 'partial');
    assert.deepEqual(r.failedParts.map((p) => p.reducer), [child.peer]);
    assert.ok(r.excluded.some((x) => x.peer === child.peer), 'the dead peer is excluded from our part');
    const dead = r.failedParts[0]!;
    assert.deepEqual(r.vector.subarray(dead.start, dead.end), vectors[i]!.subarray(dead.start, dead.end));
  }
  const again = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 1, weight: i + 1 })));
  const expected = weightedMean(vectors, [1, 2]);
  for (const r of again) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.status, 'complete');
    assert.equal(r.group.members.length, 2);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6);
  }
});

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

test('a peer on another tokenizer never enters an average: leaders refuse its join naming both hashes, it fails with DATA_MISMATCH, the others average', async (t) => {
  const nodes = await startSwarm(t, 5, { runId: 'mm-data' });
  const runData = { datasetId: 'a'.repeat(64), tokenizerSha256: 'b'.repeat(64) };
  const otherTokenizer = { ...runData, tokenizerSha256: 'c'.repeat(64) };
  // a group stays open for the whole matchmaking time (target 8 > peers), so the raw join below finds the leaders looking
  const avg = averagers(t, nodes.slice(0, 4), (i) => ({ prefix: 'grad', ...FAST, targetGroupSize: 8, data: i === 3 ? otherTokenizer : runData }));
  const vectors = avg.map((_, i) => randomVector(100, i + 1));
  const steps = avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: 1 }));

  // the same request a peer on the other tokenizer sends, to a peer looking for a group
  let refusal: JoinResponse | undefined;
  await waitFor('a peer looking for a group to refuse a join on another tokenizer', async () => {
    const framed = new FramedStream(await nodes[4]!.dial(nodes[0]!.peerId, MATCHMAKING_PROTOCOL, { signal: AbortSignal.timeout(2000) }), MAX_CONTROL_BYTES, 'test join');
    await framed.write({ t: 'join', key: 'averaging/grad:0', schema: schemaHash(100), data: otherTokenizer, weight: 1, bandwidth: 1e6, clientMode: false } satisfies JoinRequest, AbortSignal.timeout(2000));
    const answer = await framed.expect(joinResponseSchema, AbortSignal.timeout(2000), 'the answer');
    framed.abort(new Error('test done'));
    if (answer.t !== 'refused' || answer.code !== 'DATA_MISMATCH') return false;
    refusal = answer;
    return true;
  });
  assert.ok(refusal?.t === 'refused');
  assert.ok(refusal.message.includes('b'.repeat(64)) && refusal.message.includes('c'.repeat(64)), `the refusal names both tokenizer hashes: ${refusal.message}`);

  const results = await Promise.all(steps);
  const peers = nodes.map((n) => n.peerId.toString());
  // the three on the run's data go on without it (all three together, unless a starved machine left one behind)
  const grouped = results.slice(0, 3).filter((r) => r.ok);
  assert.ok(grouped.length >= 2, `the peers on the run’s data average: ${results.map((r) => (r.ok ? 'ok' : r.reason)).join(' | ')}`);
  for (const r of grouped) {
    const members = r.group.members.map((m) => peers.indexOf(m.peer));
    assert.ok(members.every((i) => i >= 0 && i < 3), `only peers on the run’s data are members: ${members.join(', ')}`);
    assert.ok(maxAbsDiff(r.vector, weightedMean(members.map((i) => vectors[i]!), members.map(() => 1))) < 1e-5, 'the average is its members’ alone');
  }
  const odd = results[3]!;
  assert.ok(!odd.ok && odd.code === 'DATA_MISMATCH', odd.ok ? 'the odd peer grouped' : `${odd.code}: ${odd.reason}`);
  assert.ok(odd.reason.includes('b'.repeat(64)) && odd.reason.includes('c'.repeat(64)), `the odd peer is told both tokenizer hashes: ${odd.reason}`);
});
