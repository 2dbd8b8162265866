import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PeerId } from '@libp2p/interface';
import type { KadDHT } from '@libp2p/kad-dht';
import { routingTable } from '../../src/swarm/libp2p-internals.js';
import { echoVia, progressSchema, startNode, waitFor } from '../helpers/swarm.js';

test('a client-mode peer stores and reads records and is reached through a relay', async (t) => {
  const relay = await startNode(t, { runId: 'nat' });
  const server = await startNode(t, { runId: 'nat', initialPeers: relay.multiaddrs() });
  // No listening address: like a laptop behind NAT, it is reachable only through its relay reservation.
  const client = await startNode(t, { runId: 'nat', clientMode: true, listen: [], initialPeers: relay.multiaddrs() });
  assert.equal((await client.ready).connected.length, 1);
  await waitFor('a relay reservation', () => client.multiaddrs().some((a) => a.includes('/p2p-circuit/')));
  const relayed = client.multiaddrs().find((a) => a.includes('/p2p-circuit/'))!;
  assert.ok(relayed.startsWith(relay.multiaddrs()[0]!.split('/p2p/')[0]!), `relayed address ${relayed} goes through the relay`);
  await waitFor('routing tables', () => [relay, server, client].map((n) => n.stats()).every((s) => s.routingTableSize >= 1));

  // The server reaches the client through the relay with a Cohort protocol (signalling-sized traffic).
  // The client cannot be dialed directly: it listens nowhere.
  const { echoed, seenFrom } = await echoVia(server, client, relayed, 'over the relay');
  assert.equal(echoed, 'over the relay');
  assert.equal(seenFrom.length, 1);
  assert.ok(seenFrom[0]!.includes('/p2p-circuit'), `the client was reached through the relay (${seenFrom[0]})`);

  const [onRelay, onServer, onClient] = [relay, server, client].map((n) => n.registerNamespace('progress', progressSchema));
  const stored = await onClient!.store('progress', '', { samples: 8, epoch: 0 }, Date.now() + 60_000);
  assert.equal(stored.replicas, 2, `a client holds no replica itself; both servers do: ${JSON.stringify(stored.refused)}`);
  // The client's store request added the records protocol to the server's peer store entry for it;
  // the server still stores on servers only (the client was counted as one, and refused the entry)
  const fromServer = await onServer!.store('progress', '', { samples: 16, epoch: 0 }, Date.now() + 60_000);
  assert.deepEqual(fromServer, { replicas: 2, refused: [] });
  const fromClient = await onClient!.get('progress');
  assert.deepEqual(fromClient.get(server.peerId.toString())?.value, { samples: 16, epoch: 0 });
  assert.deepEqual((await onRelay!.get('progress')).get(client.peerId.toString())?.value, { samples: 8, epoch: 0 });
  assert.equal(client.stats().records.entries, 0);

  // The averaging layer can tell who can only send.
  assert.equal(server.isClientMode(client.peerId), true);
  assert.equal(client.isClientMode(server.peerId), false);
  assert.equal(client.isClientMode(client.peerId), true);
  assert.deepEqual(server.stats().clientModePeers, [client.peerId.toString()]);
});

test('a client-mode peer named in a DHT answer does not stay in routing tables', async (t) => {
  const first = await startNode(t, { runId: 'nat-table', reachability: 'public' });
  const second = await startNode(t, { runId: 'nat-table', reachability: 'public', initialPeers: first.multiaddrs() });
  // dialable on loopback, as a peer in client mode by choice: the routing table's ping reaches it
  const client = await startNode(t, { runId: 'nat-table', clientMode: true, initialPeers: first.multiaddrs() });
  await client.ready;
  await waitFor("both servers in each other's routing table", () => [first, second].every((n) => n.stats().routingTableSize >= 1));
  const dht = (node: typeof first): KadDHT => node.libp2p.services.dht as KadDHT;
  const table = routingTable(dht(second));
  let added = false;
  table.addEventListener('peer:add', (event: CustomEvent<PeerId>) => (added ||= event.detail.equals(client.peerId)));
  // A lookup of the client's id (what a dial by peer id does): the first server answers with the
  // client itself, and kad-dht adds every peer an answer names once it answers a ping.
  for await (const event of dht(second).getClosestPeers(client.peerId.toMultihash().bytes, { signal: AbortSignal.timeout(10_000) })) void event;
  await waitFor('the second server to add the client to its routing table', () => added);
  await waitFor('the second server to identify the client', () => second.isClientMode(client.peerId) === true);
  await waitFor('the client to leave the routing table', async () => (await table.find(client.peerId)) === undefined, 5_000);
  assert.equal(await routingTable(dht(first)).find(client.peerId), undefined);
});
