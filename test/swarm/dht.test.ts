import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateKeyPair, publicKeyToProtobuf } from '@libp2p/crypto/keys';
import { encode as cborEncode } from 'cborg';
import { generatePsk } from '../../src/swarm/index.js';
import { kadProtocol } from '../../src/swarm/protocols.js';
import { CLOSEST_PEERS_TIMEOUT_MS, MAX_MESSAGE_BYTES } from '../../src/swarm/constants.js';
import { signEntry } from '../../src/swarm/records/entry.js';
import { progressSchema, rawRequest, startNode, startSwarm, waitFor } from '../helpers/swarm.js';

test('records stored on one peer are read from every other; newer expiration wins; entries expire', async (t) => {
  const nodes = await startSwarm(t, 6, { runId: 'dht-basic' });
  const progress = nodes.map((n) => n.registerNamespace('progress', progressSchema));
  const owner = nodes[2]!.peerId.toString();
  const soon = Date.now() + 60_000;
  const first = await progress[2]!.store('progress', '', { samples: 10, epoch: 1 }, soon);
  assert.ok(first.replicas >= 3, `stored on ${first.replicas} peers: ${JSON.stringify(first.refused)}`);
  for (const [i, p] of progress.entries()) {
    const got = await p.get('progress');
    assert.deepEqual(got.get(owner)?.value, { samples: 10, epoch: 1 }, `peer ${i} reads the record`);
    assert.equal(got.get(owner)?.owner, owner);
  }
  // A later expiration replaces the value; an earlier one is refused everywhere and changes nothing.
  await progress[2]!.store('progress', '', { samples: 20, epoch: 1 }, soon + 1000);
  const stale = await progress[2]!.store('progress', '', { samples: 5, epoch: 0 }, soon - 1000);
  assert.ok(stale.refused.some((r) => r.reason === 'not-newer'));
  assert.deepEqual((await progress[5]!.get('progress')).get(owner)?.value, { samples: 20, epoch: 1 });
  // Several owners under one key merge into one dictionary; subkeys are per owner.
  await progress[4]!.store('progress', '', { samples: 7, epoch: 1 }, soon);
  await progress[4]!.store('progress', 'gpu1', { samples: 3, epoch: 1 }, soon);
  const merged = await progress[0]!.get('progress');
  assert.deepEqual([...merged.keys()].sort(), [owner, nodes[4]!.peerId.toString(), `${nodes[4]!.peerId.toString()}/gpu1`].sort());
  // Expiration: a short-lived entry disappears from gets and is evicted.
  // (3 s: a store and a get must fit in its lifetime on a loaded machine)
  await progress[1]!.store('progress', 'short', { samples: 1, epoch: 1 }, Date.now() + 3000);
  const shortName = `${nodes[1]!.peerId.toString()}/short`;
  assert.ok((await progress[3]!.get('progress')).has(shortName));
  await waitFor('the short-lived entry to expire', async () => !(await progress[3]!.get('progress')).has(shortName), 10_000);
});

test('a swarm\'s first node, alone, stores and reads its records at once instead of waiting out a DHT query', async (t) => {
  const first = await startNode(t, { runId: 'dht-alone' });
  const progress = first.registerNamespace('progress', progressSchema);
  await waitFor('the first node to serve the DHT', () => !first.clientMode);
  const started = Date.now();
  const stored = await progress.store('progress', '', { samples: 3, epoch: 0 }, Date.now() + 60_000);
  const got = await progress.get('progress');
  const elapsed = Date.now() - started;
  assert.equal(stored.replicas, 1, 'it holds its own record (the first node serves the DHT)');
  assert.deepEqual(got.get(first.peerId.toString())?.value, { samples: 3, epoch: 0 });
  // each of the two used to wait out the closest-peers query (10 s) with nobody to ask
  assert.ok(elapsed < CLOSEST_PEERS_TIMEOUT_MS / 2, `store + get took ${elapsed} ms`);
});

test('a peer whose DHT lookups run out of time still stores to and reads from the servers it is connected to', async (t) => {
  const runId = 'dht-stalled-lookup';
  const server = await startNode(t, { runId, reachability: 'public' });
  const peer = await startNode(t, { runId, clientMode: true, initialPeers: server.multiaddrs() });
  await peer.ready;
  await waitFor('the peer to know the server', () => peer.stats().routingTableSize >= 1 && peer.isClientMode(server.peerId) === false);
  // The server stops answering DHT queries (as an overloaded one does): every lookup waits out its time.
  // A late peer in this state used to store nowhere and read nothing: it saw only itself in the progress.
  await server.libp2p.unhandle(kadProtocol(runId));
  await server.libp2p.handle(kadProtocol(runId), () => undefined);
  const [onPeer, onServer] = [peer, server].map((n) => n.registerNamespace('progress', progressSchema));
  await onServer!.store('progress', '', { samples: 5, epoch: 2 }, Date.now() + 60_000);
  const stored = await onPeer!.store('progress', '', { samples: 7, epoch: 2 }, Date.now() + 60_000);
  assert.equal(stored.replicas, 1, `the connected server holds the record (refused: ${JSON.stringify(stored.refused)})`);
  const got = await onPeer!.get('progress');
  assert.deepEqual(got.get(server.peerId.toString())?.value, { samples: 5, epoch: 2 }, 'the peer reads the server\'s record');
  assert.deepEqual(got.get(peer.peerId.toString())?.value, { samples: 7, epoch: 2 });
});

test('another peer cannot write or forge a subkey; malformed, oversized and unsigned records are refused and counted', async (t) => {
  const [ka, kb] = [await generateKeyPair('Ed25519'), await generateKeyPair('Ed25519')];
  const a = await startNode(t, { runId: 'dht-forge', privateKey: ka });
  const [b, c] = await Promise.all([startNode(t, { runId: 'dht-forge', privateKey: kb, initialPeers: a.multiaddrs() }), startNode(t, { runId: 'dht-forge', initialPeers: a.multiaddrs() })]);
  await waitFor('routing tables', () => [a, b, c].map((n) => n.stats()).every((s) => s.routingTableSize >= 1));
  const [pa, pb, pc] = [a, b, c].map((n) => n.registerNamespace('progress', progressSchema, { maxValueBytes: 64 }));
  const expiration = Date.now() + 60_000;
  await pa!.store('progress', '', { samples: 100, epoch: 3 }, expiration);
  // b writes "the same" subkey: it lands under b's own name, a's entry is untouched.
  await pb!.store('progress', '', { samples: 0, epoch: 3 }, expiration + 5000);
  const seen = await pc!.get('progress');
  assert.deepEqual(seen.get(a.peerId.toString())?.value, { samples: 100, epoch: 3 });
  assert.deepEqual(seen.get(b.peerId.toString())?.value, { samples: 0, epoch: 3 });

  const store = (entry: unknown): Uint8Array => cborEncode({ t: 'store', e: [entry] });
  // b forges a newer entry in a's name (a's public key, b's signature) and sends it straight to c.
  const forged = { ...(await signEntry(kb, 'dht-forge', 'progress', '', cborEncode({ samples: 1, epoch: 9 }), expiration + 9000)), p: publicKeyToProtobuf(ka.publicKey) };
  assert.deepEqual(await rawRequest(b, c, store(forged)), { t: 'stored', r: ['bad-signature'] });
  const unsigned = { ...forged, g: new Uint8Array(0) };
  assert.deepEqual(await rawRequest(b, c, store(unsigned)), { t: 'stored', r: ['bad-signature'] });
  const oversized = await signEntry(kb, 'dht-forge', 'progress', 'big', cborEncode({ samples: 1, epoch: 1, pad: 'x'.repeat(200) }), expiration);
  assert.deepEqual(await rawRequest(b, c, store(oversized)), { t: 'stored', r: ['value-too-large'] });
  assert.deepEqual(await rawRequest(b, c, store({ k: 'progress', s: '', v: new Uint8Array(1) })), { t: 'stored', r: ['malformed'] });
  assert.deepEqual(await rawRequest(b, c, new Uint8Array([0xff, 0x00, 0x13])), { t: 'refused', reason: 'malformed' });
  assert.deepEqual(await rawRequest(b, c, cborEncode({ t: 'store', e: [] })), { t: 'refused', reason: 'malformed' });
  // A frame over the message limit: c resets the stream instead of buffering it.
  await assert.rejects(rawRequest(b, c, new Uint8Array(MAX_MESSAGE_BYTES + 1)));

  const rejected = c.stats().records.rejected;
  assert.equal(rejected['bad-signature'], 2);
  assert.equal(rejected['value-too-large'], 1);
  assert.ok((rejected.malformed ?? 0) >= 4, `malformed count ${rejected.malformed}`);
  const after = await pa!.get('progress');
  assert.deepEqual(after.get(a.peerId.toString())?.value, { samples: 100, epoch: 3 }, 'the forged entry is stored nowhere');
  assert.equal(after.has(`${b.peerId.toString()}/big`), false);
});

test('two swarms with different run ids never see each other, even when connected', async (t) => {
  const [red, blue] = await Promise.all([startSwarm(t, 3, { runId: 'swarm-red' }), startSwarm(t, 3, { runId: 'swarm-blue' })]);
  // Connect the swarms directly: they share no protocol, so no DHT routing or records cross.
  await blue[0]!.libp2p.dial(red[0]!.libp2p.getMultiaddrs()[0]!);
  const redRecords = red.map((n) => n.registerNamespace('progress', progressSchema));
  const blueRecords = blue.map((n) => n.registerNamespace('progress', progressSchema));
  await redRecords[1]!.store('progress', '', { samples: 1, epoch: 1 }, Date.now() + 60_000);
  await blueRecords[1]!.store('progress', '', { samples: 2, epoch: 1 }, Date.now() + 60_000);
  for (const r of blueRecords) assert.deepEqual([...(await r.get('progress')).values()].map((e) => e.value), [{ samples: 2, epoch: 1 }]);
  for (const r of redRecords) assert.deepEqual([...(await r.get('progress')).values()].map((e) => e.value), [{ samples: 1, epoch: 1 }]);
  for (const n of [...red, ...blue]) assert.ok(n.stats().routingTableSize <= 2, 'routing tables hold only their own swarm');
});

test('a private swarm (PSK) refuses peers without its key', async (t) => {
  const psk = generatePsk();
  const closed = await startNode(t, { runId: 'closed', psk });
  const member = await startNode(t, { runId: 'closed', psk, initialPeers: closed.multiaddrs() });
  assert.equal((await member.ready).connected.length, 1);
  const once = { attempts: 1, initialBackoffMs: 10, maxBackoffMs: 10 };
  const outsider = await startNode(t, { runId: 'closed', initialPeers: closed.multiaddrs(), bootstrap: once });
  const wrongKey = await startNode(t, { runId: 'closed', psk: generatePsk(), initialPeers: closed.multiaddrs(), bootstrap: once });
  for (const stranger of [outsider, wrongKey]) {
    const report = await stranger.ready;
    assert.deepEqual(report.connected, []);
    assert.equal(report.failed.length, 1);
    assert.equal(stranger.libp2p.getConnections(closed.peerId).length, 0);
  }
});
