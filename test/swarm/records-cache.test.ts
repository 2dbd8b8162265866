import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { peerIdFromString } from '@libp2p/peer-id';
import { recordsProtocol, type SwarmNode } from '../../src/swarm/index.js';
import { ClosestServersCache } from '../../src/swarm/records/closest-cache.js';
import { progressSchema, startSwarm, waitFor } from '../helpers/swarm.js';

const sha256 = (bytes: Uint8Array | string): Buffer => createHash('sha256').update(bytes).digest();

/** The nodes by XOR distance to a record key, nearest first, as docs/protocol.md places records. */
function byDistance(nodes: readonly SwarmNode[], runId: string, key: string): SwarmNode[] {
  const target = sha256(`${recordsProtocol(runId)}/${key}`);
  const distance = (n: SwarmNode): Buffer => Buffer.from(sha256(n.peerId.toMultihash().bytes).map((x, i) => x ^ target[i]!));
  return [...nodes].sort((a, b) => Buffer.compare(distance(a), distance(b)));
}

const lookups = (n: SwarmNode): { walked: number; cached: number; stale: number } => n.stats().records.lookups;

test('closest-servers cache: an entry serves counts up to its lookup\'s, for its TTL from the lookup; the oldest lookup goes first', () => {
  let now = 0;
  const cache = new ClosestServersCache(1000, 2, () => now);
  const [a, b, c] = ['12D3KooWLTGdNZ8Pj2w8fVVtzDjdxbwGCYxD2AMfTkqjrtFcjmXN', '12D3KooWGpmtrjQP4Gq2qCzEAjiyUtwsvffVsXGZEGX4NGUbBbMt', '12D3KooWBjtr2fmBjNcdBiQGF2rtkn5NwrX9ZJkmC1jEn6SN9cXo'].map((id) => peerIdFromString(id)) as [ReturnType<typeof peerIdFromString>, ReturnType<typeof peerIdFromString>, ReturnType<typeof peerIdFromString>];
  cache.set('progress', [a, b]);
  assert.deepEqual(cache.get('progress', 1), [a], 'a store (fewer servers) uses a get\'s lookup');
  assert.deepEqual(cache.get('progress', 2), [a, b]);
  assert.equal(cache.get('progress', 3), undefined, 'a lookup of fewer servers does not answer for more');
  now = 999;
  assert.deepEqual(cache.get('progress', 2), [a, b], 'using an entry does not extend it');
  now = 1000;
  assert.equal(cache.get('progress', 1), undefined, 'expired at its TTL');
  assert.equal(cache.size, 0);
  cache.set('k1', [a]);
  now = 1001;
  cache.set('k2', [b]);
  cache.set('k1', [c]); // k1 looked up again: now the newest
  cache.set('k3', [a]);
  assert.equal(cache.get('k2', 1), undefined, 'the oldest lookup left when a third key came');
  assert.deepEqual([cache.get('k1', 1), cache.get('k3', 1)], [[c], [a]]);
  assert.throws(() => new ClosestServersCache(0, 2, () => now), /ttl 0 ms must be positive/);
});

test('a key stored or read again within the TTL goes straight to the servers a lookup found, without a new lookup, until one fails', async (t) => {
  const runId = 'dht-cache-hit';
  // replication 2: a get asks the 4 closest of the 5 other servers, a store the 2 closest
  const nodes = await startSwarm(t, 6, { runId, replication: 2 });
  const progress = nodes.map((n) => n.registerNamespace('progress', progressSchema));
  const [writer, reader] = [nodes[0]!, nodes[5]!];
  const servedGets = (): number[] => nodes.map((n) => n.stats().records.getRequestsServed);
  const servedStores = (): number[] => nodes.map((n) => n.stats().records.storeRequestsServed);
  const askedSince = (before: number[], after: number[]): number[] => after.flatMap((n, i) => (n > before[i]! ? [i] : []));

  let before = servedStores();
  const first = await progress[0]!.store('progress', '', { samples: 1, epoch: 0 }, Date.now() + 60_000);
  const storedOn = askedSince(before, servedStores());
  assert.deepEqual(lookups(writer), { walked: 1, cached: 0, stale: 0 });
  before = servedStores();
  const second = await progress[0]!.store('progress', '', { samples: 2, epoch: 0 }, Date.now() + 61_000);
  assert.deepEqual(lookups(writer), { walked: 1, cached: 1, stale: 0 }, 'the second store did no lookup');
  assert.deepEqual(askedSince(before, servedStores()), storedOn, 'and went to the servers the first store found');
  assert.deepEqual([second.replicas, second.refused], [first.replicas, []]);

  before = servedGets();
  const read = await progress[5]!.get('progress');
  const readFrom = askedSince(before, servedGets());
  assert.equal(readFrom.length, 4);
  assert.deepEqual(read.get(writer.peerId.toString())?.value, { samples: 2, epoch: 0 });
  assert.deepEqual(lookups(reader), { walked: 1, cached: 0, stale: 0 });
  before = servedGets();
  const again = await progress[5]!.get('progress');
  assert.deepEqual(lookups(reader), { walked: 1, cached: 1, stale: 0 }, 'the second read did no lookup');
  assert.deepEqual(askedSince(before, servedGets()), readFrom, 'and asked the servers the first read found');
  assert.deepEqual(again, read, 'and returned the same record');

  // A cached server that no longer answers (still connected, its records protocol gone): the read
  // asks the others, looks the key up again at once and still returns the record.
  await nodes[readFrom[0]!]!.libp2p.unhandle(recordsProtocol(runId));
  assert.deepEqual((await progress[5]!.get('progress')).get(writer.peerId.toString())?.value, { samples: 2, epoch: 0 });
  assert.deepEqual(lookups(reader), { walked: 2, cached: 2, stale: 1 });
  // that lookup still named the failing server (it answers DHT queries): not kept, the next read looks up again
  assert.deepEqual((await progress[5]!.get('progress')).get(writer.peerId.toString())?.value, { samples: 2, epoch: 0 });
  assert.deepEqual(lookups(reader), { walked: 3, cached: 2, stale: 1 });
});

test('a cached closest server that stopped: a read looks the key up again and finds the record elsewhere; a store reaches the next closest', async (t) => {
  const runId = 'dht-cache-stale';
  const key = 'progress';
  // replication 1: a store goes to the closest other server (and the writer, a server, keeps its own
  // entry), a get asks the 2 closest. Roles by distance to the key: the record lives on the closest
  // (s1) and on the writer (third); the reader (farthest) first finds s1 and s2.
  const [s1, s2, writer, reader] = byDistance(await startSwarm(t, 4, { runId, replication: 1 }), runId, key) as [SwarmNode, SwarmNode, SwarmNode, SwarmNode];
  const [onWriter, onReader] = [writer, reader].map((n) => n.registerNamespace('progress', progressSchema)) as [ReturnType<SwarmNode['registerNamespace']>, ReturnType<SwarmNode['registerNamespace']>];
  const owner = writer.peerId.toString();
  const stored = await onWriter.store(key, '', { samples: 1, epoch: 0 }, Date.now() + 60_000);
  assert.equal(stored.replicas, 2, `held by the writer and s1 (refused: ${JSON.stringify(stored.refused)})`);
  assert.equal(s1.stats().records.entries, 1);
  assert.deepEqual((await onReader.get(key)).get(owner)?.value, { samples: 1, epoch: 0 });
  assert.equal(s2.stats().records.getRequestsServed, 1, 'the reader asked s1 and s2');

  await s1.stop();
  await waitFor('the reader and the writer to see s1 gone', () => [reader, writer].every((n) => n.libp2p.getConnections(s1.peerId).length === 0));
  // the cached s2 does not hold the record: asking only it would return nothing
  const got = await onReader.get(key);
  assert.deepEqual(got.get(owner)?.value, { samples: 1, epoch: 0 }, 'found on the writer by a new lookup');
  assert.deepEqual(lookups(reader), { walked: 2, cached: 0, stale: 1 });

  const restored = await onWriter.store(key, '', { samples: 2, epoch: 0 }, Date.now() + 61_000);
  assert.deepEqual([restored.replicas, restored.refused], [2, []], 'held by the writer and s2, now the closest other server');
  assert.equal(s2.stats().records.entries, 1);
  assert.deepEqual(lookups(writer), { walked: 2, cached: 0, stale: 1 });
  // the reader's new lookup found s2 and the writer: read from them without another
  assert.deepEqual((await onReader.get(key)).get(owner)?.value, { samples: 2, epoch: 0 });
  assert.deepEqual(lookups(reader), { walked: 2, cached: 1, stale: 1 });
});
