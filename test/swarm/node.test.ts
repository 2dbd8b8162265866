import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { multiaddr } from '@multiformats/multiaddr';
import { openStore } from '../../src/store/index.js';
import { IdentityError, createSwarmNode, readToEnd, swarmMetrics } from '../../src/swarm/index.js';
import { prometheusText } from '../../src/util/prometheus.js';
import { warningLog } from '../helpers/log.js';
import { echoVia, progressSchema, startNode, startSwarm, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

test('a peer is seen until its last connection closes, not only when it identified (the dashboard’s last seen)', async (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const a = await createSwarmNode({ runId: 'seen', listen: ['/ip4/127.0.0.1/tcp/0'] });
  t.after(() => a.stop());
  const c = await createSwarmNode({ runId: 'seen', listen: ['/ip4/127.0.0.1/tcp/0'], initialPeers: a.multiaddrs() }, store);
  t.after(() => c.stop());
  const row = () => store.peers.list().find((p) => p.peerId === a.peerId.toString());
  await waitFor('the peer to identify', () => row() !== undefined);
  const identified = row()!.lastSeen;
  const stopped = Date.now();
  await a.stop();
  await waitFor('the connection to close', () => (row()?.lastSeen ?? 0) >= stopped);
  assert.ok(row()!.lastSeen > identified);
});

test('the identity is kept in the store, or in a key file, across restarts', async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  t.after(() => store.close());
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    const node = await createSwarmNode({ runId: 'id', listen: ['/ip4/127.0.0.1/tcp/0'] }, store);
    ids.push(node.peerId.toString());
    await node.stop();
  }
  assert.equal(ids[0], ids[1]);

  const keyFile = path.join(dir, 'keys', 'peer.key');
  const fromFile: string[] = [];
  for (let i = 0; i < 2; i++) {
    const node = await createSwarmNode({ runId: 'id', listen: ['/ip4/127.0.0.1/tcp/0'], identityFile: keyFile }, store);
    fromFile.push(node.peerId.toString());
    await node.stop();
  }
  assert.equal(fromFile[0], fromFile[1]);
  assert.notEqual(fromFile[0], ids[0], 'the key file wins over the stored identity');
  assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600);

  fs.writeFileSync(path.join(dir, 'bad.key'), 'not a key');
  await assert.rejects(createSwarmNode({ runId: 'id', identityFile: path.join(dir, 'bad.key') }), (err: unknown) => err instanceof IdentityError && /bad\.key: not a libp2p private key/.test(err.message));
});

test('a dead initial peer does not stop the node; retries are bounded and the failure is explained', async (t) => {
  const gone = await createSwarmNode({ runId: 'boot', listen: ['/ip4/127.0.0.1/tcp/0'] });
  const deadAddr = gone.multiaddrs()[0]!;
  await gone.stop();
  const live = await startNode(t, { runId: 'boot' });

  const logs = new PassThrough();
  let logged = '';
  logs.on('data', (d: Buffer) => (logged += d.toString()));
  const bootstrap = { attempts: 3, initialBackoffMs: 20, maxBackoffMs: 40 };
  const mixed = await startNode(t, { runId: 'boot', initialPeers: [deadAddr, live.multiaddrs()[0]!], bootstrap, log: pino({ level: 'info' }, logs) });
  const report = await mixed.ready;
  assert.deepEqual(report.connected, [live.multiaddrs()[0]]);
  assert.deepEqual(report.failed.map((f) => f.addr), [deadAddr]);
  assert.equal((logged.match(/did not answer \(attempt/g) ?? []).length, 2, 'two retries after the first attempt');

  logged = '';
  const alone = await startNode(t, { runId: 'boot', initialPeers: [deadAddr], bootstrap, log: pino({ level: 'info' }, logs) });
  assert.equal((await alone.ready).connected.length, 0);
  assert.match(logged, /none of the 1 initial peer\(s\) answered after 3 attempts each/);
  // still a working node: another peer can join through it
  const joiner = await startNode(t, { runId: 'boot', initialPeers: alone.multiaddrs() });
  assert.equal((await joiner.ready).connected.length, 1);
});

test('stats report peers, routing table, records and bytes per protocol; Cohort protocols are run-namespaced', async (t) => {
  const [a, b] = await startSwarm(t, 2, { runId: 'stats' });
  await a!.handle('hello/1.0.0', async (stream) => {
    stream.send(new TextEncoder().encode('hi'));
    await stream.close();
  });
  // every protocol of ours is under the run prefix; the rest are libp2p's own
  const ours = a!.libp2p.getProtocols().filter((p) => !/^\/(ipfs|libp2p)\//.test(p));
  assert.deepEqual(ours.sort(), ['/cohort/stats/dialback/1.0.0', '/cohort/stats/hello/1.0.0', '/cohort/stats/kad/1.0.0', '/cohort/stats/records/1.0.0']);
  const stream = await b!.dial(a!.peerId, 'hello/1.0.0');
  await stream.close();
  assert.equal(new TextDecoder().decode(await readToEnd(stream, { maxBytes: 1024 })), 'hi');
  // a protocol the peer does not serve (another Cohort release's version of it) is named with the peer
  await assert.rejects(b!.dial(a!.peerId, 'absent/1.0.0'), (err: Error) => err.name === 'UnsupportedProtocolError' && err.message === `${a!.peerId.toString()} does not speak /cohort/stats/absent/1.0.0: it runs another Cohort release, or does not serve it`);

  const progress = b!.registerNamespace('progress', progressSchema);
  a!.registerNamespace('progress', progressSchema);
  await progress.store('progress', '', { samples: 1, epoch: 0 }, Date.now() + 60_000);
  const stats = a!.stats();
  assert.equal(stats.connectedPeers, 1);
  assert.equal(stats.routingTableSize, 1);
  assert.deepEqual({ keys: stats.records.keys, entries: stats.records.entries, served: stats.records.storeRequestsServed }, { keys: 1, entries: 1, served: 1 });
  assert.ok(stats.transfer['/cohort/stats/records/1.0.0']!.received > 100, 'the store request was counted');
  assert.ok(stats.transfer['/cohort/stats/hello/1.0.0']!.sent >= 2);
  assert.ok(stats.transfer['global']!.sent > stats.transfer['/cohort/stats/hello/1.0.0']!.sent);
  const prom = await prometheusText(swarmMetrics(a!));
  assert.match(prom, /^cohort_swarm_transfer_bytes_total\{protocol="\/cohort\/stats\/records\/1\.0\.0",direction="received"\} [1-9]\d*$/m);
  assert.match(prom, /^cohort_swarm_routing_table_size 1$/m);
});

test('native TLS: direct connections are TLS on the socket, relayed ones negotiate /tls/1.0.0 inside the relay\'s stream', async (t) => {
  const relay = await startNode(t, { runId: 'crypto', encryption: 'native-tls' });
  const peer = await startNode(t, { runId: 'crypto', encryption: 'native-tls', initialPeers: relay.multiaddrs() });
  const client = await startNode(t, { runId: 'crypto', encryption: 'native-tls', clientMode: true, listen: [], initialPeers: relay.multiaddrs() });
  await waitFor('a relay reservation', () => client.multiaddrs().some((a) => a.includes('/p2p-circuit/')));
  const relayed = client.multiaddrs().find((a) => a.includes('/p2p-circuit/'))!;
  assert.equal((await echoVia(peer, client, relayed, 'through the relay')).echoed, 'through the relay');
  assert.deepEqual(peer.libp2p.getConnections(client.peerId).map((c) => [c.limits !== undefined, c.encryption]), [[true, '/tls/1.0.0']]);
  for (const p of [peer, client]) assert.deepEqual(p.libp2p.getConnections(relay.peerId).map((c) => c.encryption), ['native']);
});

test('standard libp2p (@libp2p/tcp): peers preferring TLS and Noise interoperate; a native-TLS peer refuses them with a clear error', async (t) => {
  const noisePeer = await startNode(t, { runId: 'crypto', encryption: 'noise' });
  const tlsPeer = await startNode(t, { runId: 'crypto', encryption: 'tls', initialPeers: noisePeer.multiaddrs() });
  assert.equal((await tlsPeer.ready).connected.length, 1);
  // the dialer's preference wins
  assert.deepEqual(tlsPeer.libp2p.getConnections(noisePeer.peerId).map((c) => c.encryption), ['/tls/1.0.0']);
  const ns = [noisePeer, tlsPeer].map((n) => n.registerNamespace('progress', progressSchema));
  await ns[1]!.store('progress', '', { samples: 3, epoch: 0 }, Date.now() + 60_000);
  assert.equal((await ns[0]!.get('progress')).get(tlsPeer.peerId.toString())?.value.samples, 3);
  const native = await startNode(t, { runId: 'crypto', encryption: 'native-tls' });
  await assert.rejects(native.libp2p.dial(multiaddr(tlsPeer.multiaddrs()[0])), /TLS handshake with .* failed: .*older Cohort/);
});

test('a peer of another Cohort release (identify lists a protocol of ours in another version) is named once per peer, on both sides, not at every connection', async (t) => {
  const logs = [warningLog(), warningLog()];
  const [a, b] = await Promise.all(logs.map(({ log }) => startNode(t, { runId: 'versions', log })));
  // the same protocol in two versions (as state/2.0.0 against a release's state/3.0.0), and one both speak
  await a!.handle('probe/1.0.0', (stream) => void stream.close());
  await b!.handle('probe/2.0.0', (stream) => void stream.close());
  for (const node of [a!, b!]) await node.handle('same/1.0.0', (stream) => void stream.close());
  const told = (i: number, peer: string): string[] => logs[i]!.warnings.filter((w) => w.startsWith(`peer ${peer} speaks`));
  const [aId, bId] = [a!.peerId.toString(), b!.peerId.toString()];
  const identified = [0, 0];
  a!.libp2p.addEventListener('peer:identify', () => identified[0]!++);
  b!.libp2p.addEventListener('peer:identify', () => identified[1]!++);
  for (let connection = 1; connection <= 2; connection++) {
    await b!.libp2p.dial(multiaddr(a!.multiaddrs()[0]));
    await waitFor(`both to identify each other on connection ${connection}`, () => identified.every((n) => n >= connection));
    await b!.libp2p.hangUp(a!.peerId);
  }
  assert.deepEqual(told(0, bId), [`peer ${bId} speaks probe/2.0.0 where this node speaks probe/1.0.0: it runs another Cohort release, and the two do not exchange these; if this node's release is older, update it (the app updates itself on restart; \`cohort --version\` shows the CLI's)`]);
  assert.equal(told(1, aId).length, 1, logs[1]!.warnings.join('\n'));
  assert.match(told(1, aId)[0]!, /speaks probe\/1\.0\.0 where this node speaks probe\/2\.0\.0/);
  // and the dashboard says it once, with what to do
  for (const node of [a!, b!]) assert.deepEqual(node.notices.shown().map((n) => n.kind), ['other-release']);
});
