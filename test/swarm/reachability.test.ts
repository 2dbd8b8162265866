import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import type { PeerId } from '@libp2p/interface';
import type { SingleKadDHT } from '@libp2p/kad-dht';
import { averagers, FAST, maxAbsDiff, randomVector, weightedMean } from '../averaging/helpers.js';
import { swarmMetrics, type SwarmNode } from '../../src/swarm/index.js';
import { prometheusText } from '../../src/util/prometheus.js';
import { echoVia, progressSchema, startNode, startSwarm, waitFor } from '../helpers/swarm.js';

function captureLog(): { log: pino.Logger; text: () => string } {
  const sink = new PassThrough();
  let logged = '';
  sink.on('data', (d: Buffer) => (logged += d.toString()));
  return { log: pino({ level: 'info' }, sink), text: () => logged };
}

/** kad-dht's routing table has `find`; its public type only declares `size`. */
type FindableTable = { find(peer: PeerId): Promise<PeerId | undefined> };

async function inRoutingTable(of: SwarmNode, peer: SwarmNode): Promise<boolean> {
  const table = (of.libp2p.services.dht as SingleKadDHT).routingTable as unknown as FindableTable;
  return (await table.find(peer.peerId)) !== undefined;
}

async function inAllRoutingTables(of: readonly SwarmNode[], peer: SwarmNode): Promise<boolean> {
  return (await Promise.all(of.map((s) => inRoutingTable(s, peer)))).every(Boolean);
}

test('an auto-mode peer that other peers can dial back becomes a DHT server: routing tables, records, isClientMode follow', async (t) => {
  const servers = await startSwarm(t, 3, { runId: 'reach-public' });
  const { log, text } = captureLog();
  const joiner = await startNode(t, { runId: 'reach-public', initialPeers: servers[0]!.multiaddrs(), log });
  // Auto mode starts as a DHT client: a NAT'd node must never advertise itself as a server.
  assert.equal(joiner.reachability, 'unknown');
  assert.equal(joiner.clientMode, true);
  assert.equal(joiner.stats().reachability, 'unknown');

  await waitFor('AutoNAT to confirm the joiner', () => joiner.reachability === 'public');
  assert.match(text(), /AutoNAT: \d of \d peer\(s\) dialed us back at \/ip4\/127\.0\.0\.1\/tcp\/\d+; serving the DHT/);
  assert.equal(joiner.clientMode, false);
  assert.deepEqual([joiner.stats().reachability, joiner.stats().clientMode], ['public', false]);
  assert.match(await prometheusText(swarmMetrics(joiner)), /^cohort_swarm_reachability\{state="public"\} 1$/m);
  await waitFor('every server to put the joiner in its routing table', () => inAllRoutingTables(servers, joiner));
  await waitFor('identify-push to tell every server the joiner serves', () => servers.every((s) => s.isClientMode(joiner.peerId) === false));

  // It holds records for others now: a store from a server (replication 5 > 4 peers) reaches it.
  const progress = [...servers, joiner].map((n) => n.registerNamespace('progress', progressSchema));
  const stored = await progress[1]!.store('progress', '', { samples: 3, epoch: 0 }, Date.now() + 60_000);
  assert.equal(stored.replicas, 4, JSON.stringify(stored.refused));
  assert.equal(joiner.stats().records.entries, 1);
  assert.ok(joiner.stats().records.storeRequestsServed >= 1);
});

test('an auto-mode peer nobody can dial back stays a client, gets a relay reservation, and still uses records and averaging', async (t) => {
  const servers = await startSwarm(t, 3, { runId: 'reach-private' });
  const { log, text } = captureLog();
  // Listening on 127.0.0.2 only, while its connections come from 127.0.0.1: like a laptop behind
  // NAT, the address it is seen at accepts no connections on its port, so every dial-back fails.
  const natted = await startNode(t, { runId: 'reach-private', listen: ['/ip4/127.0.0.2/tcp/0'], initialPeers: servers[0]!.multiaddrs(), log });
  await waitFor('AutoNAT to decide', () => natted.reachability !== 'unknown');
  assert.equal(natted.reachability, 'private');
  assert.match(text(), /AutoNAT: not reachable at \/ip4\/127\.0\.0\.2\/tcp\/\d+ \(.*ECONNREFUSED.*\); client mode, reachable through relays/);
  assert.equal(natted.clientMode, true);

  await waitFor('a relay reservation', () => natted.multiaddrs().some((a) => a.includes('/p2p-circuit/')));
  await waitFor('the relayed address in the log', () => /client mode: reachable through the relay at \/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/\w+\/p2p-circuit/.test(text()));
  const relayed = natted.multiaddrs().find((a) => a.includes('/p2p-circuit/'))!;
  // Another server reaches it through the relay.
  const other = servers.find((s) => !relayed.includes(s.peerId.toString()))!;
  assert.equal((await echoVia(other, natted, relayed, 'via relay')).echoed, 'via relay');

  for (const s of servers) assert.equal(s.isClientMode(natted.peerId), true);
  assert.deepEqual(await Promise.all(servers.map((s) => inRoutingTable(s, natted))), [false, false, false], 'a client is in nobody’s routing table');

  // Records: it stores on the servers and reads them, holding none itself.
  const progress = [...servers, natted].map((n) => n.registerNamespace('progress', progressSchema));
  const stored = await progress[3]!.store('progress', '', { samples: 8, epoch: 1 }, Date.now() + 60_000);
  assert.equal(stored.replicas, 3, JSON.stringify(stored.refused));
  await progress[0]!.store('progress', '', { samples: 16, epoch: 1 }, Date.now() + 60_000);
  const seen = await progress[3]!.get('progress');
  assert.deepEqual(seen.get(servers[0]!.peerId.toString())?.value, { samples: 16, epoch: 1 });
  assert.deepEqual((await progress[2]!.get('progress')).get(natted.peerId.toString())?.value, { samples: 8, epoch: 1 });
  assert.equal(natted.stats().records.entries, 0);

  // Averaging: the unreachable peer only sends; the servers reduce its share.
  const avg = averagers(t, [...servers, natted], () => ({ prefix: 'grad', ...FAST, targetGroupSize: 4, chunkValues: 500 }));
  const n = 2000;
  const vectors = [1, 2, 3, 4].map((seed) => randomVector(n, seed));
  const weights = [1, 2, 3, 4];
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
  const expected = weightedMean(vectors, weights);
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.group.members.length, 4);
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6);
    const c = r.group.members.findIndex((m) => m.peer === natted.peerId.toString());
    assert.equal(r.group.members[c]!.clientMode, true);
    assert.equal(r.group.parts[c]![1] - r.group.parts[c]![0], 0, 'the unreachable peer reduces nothing');
  }
});

test('the first peer of a swarm serves at once; forced modes never probe', async (t) => {
  const { log, text } = captureLog();
  const first = await startNode(t, { runId: 'reach-forced', log });
  await first.ready;
  assert.equal(first.reachability, 'public');
  assert.match(text(), /AutoNAT: no initial peers, .* this node is the bootstrap of the swarm; serving the DHT/);
  const forced = await startNode(t, { runId: 'reach-forced', reachability: 'public', initialPeers: first.multiaddrs() });
  assert.equal(forced.reachability, 'public', 'public from the start, before bootstrap ends');
  const client = await startNode(t, { runId: 'reach-forced', reachability: 'private', listen: [], initialPeers: first.multiaddrs() });
  assert.equal(client.reachability, 'private');
  await client.ready;
  await waitFor('routing tables', async () => (await inRoutingTable(first, forced)) && (await inRoutingTable(forced, first)));
  assert.equal(await inRoutingTable(first, client), false);
  assert.equal(client.reachability, 'private');
  await waitFor('identify', () => first.isClientMode(client.peerId) === true && first.isClientMode(forced.peerId) === false);
});

test('a peer none of whose initial peers answer serves the DHT, so peers joining through it use records; restarted peers of a run whose bootstrap is gone form a swarm', async (t) => {
  // the run's bootstrap (its coordinator) is gone; a peer restarts with its join code
  const gone = await startNode(t, { runId: 'reach-gone' });
  const goneAddrs = gone.multiaddrs();
  await gone.stop();
  const { log, text } = captureLog();
  const first = await startNode(t, { runId: 'reach-gone', initialPeers: goneAddrs, bootstrap: { attempts: 1 }, log });
  assert.equal((await first.ready).connected.length, 0);
  assert.equal(first.reachability, 'public');
  // not the swarm's bootstrap: its initial peers did not answer
  assert.match(text(), /AutoNAT: none of the 1 initial peer\(s\) answered, so nobody can dial us back yet: serving the DHT meanwhile, so that peers joining through this node find each other; the first server met is asked to confirm/);
  assert.doesNotMatch(text(), /bootstrap of the swarm/);
  // another peer joins through it: a server to ask, and to hold records
  const joiner = await startNode(t, { runId: 'reach-gone', initialPeers: first.multiaddrs() });
  await waitFor('AutoNAT (the restarted peer dials back) to confirm the joiner', () => joiner.reachability === 'public');
  const [held, stored] = [first, joiner].map((n) => n.registerNamespace('progress', progressSchema));
  const result = await stored!.store('progress', '', { samples: 3, epoch: 7 }, Date.now() + 60_000);
  assert.ok(result.replicas >= 1, JSON.stringify(result.refused));
  assert.deepEqual([...(await held!.get('progress')).values()].map((e) => e.value), [{ samples: 3, epoch: 7 }]);
});
