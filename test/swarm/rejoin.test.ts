// A node left with no connection redials its initial peers. In the swarm lab a peer whose connections
// all dropped on a loaded machine trained alone for the rest of the run, its progress stored nowhere and
// read from nowhere: libp2p's own reconnection gives up after 5 tries (about 30 s), and nobody dials a
// DHT client back. Here the initial peer is down for longer than that, then back at the same address.
import assert from 'node:assert/strict';
import test from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { pino } from 'pino';
import { REJOIN_CHECK_MS } from '../../src/swarm/constants.js';
import { progressSchema, startNode, waitFor } from '../helpers/swarm.js';

test('a joiner whose initial peer was gone longer than libp2p retries redials it once it is back, and reads its records', { timeout: 120_000 }, async (t) => {
  const privateKey = await generateKeyPair('Ed25519');
  const init = { runId: 'rejoin-test', reachability: 'public' as const, privateKey };
  const first = await startNode(t, init);
  const addr = first.multiaddrs()[0]!;
  const lines: string[] = [];
  const joiner = await startNode(t, { runId: 'rejoin-test', initialPeers: [addr], log: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }) });
  await joiner.ready;
  await first.stop();
  await waitFor('the joiner to lose its connection', () => joiner.libp2p.getConnections().length === 0, 10_000);
  // libp2p's reconnect queue: 5 tries, 1 s apart doubling (31 s)
  await new Promise((r) => setTimeout(r, 35_000));
  const back = await startNode(t, { ...init, listen: [addr.split('/p2p/')[0]!] });
  const theirs = joiner.registerNamespace('progress', progressSchema);
  await back.registerNamespace('progress', progressSchema).store('progress', '', { samples: 1, epoch: 3 }, Date.now() + 60_000);
  await waitFor('the joiner to reconnect', () => joiner.libp2p.getConnections(back.peerId).length > 0, 2 * REJOIN_CHECK_MS + 10_000);
  assert.equal((await theirs.get('progress')).size, 1, 'the rejoined node reads the record');
  assert.ok(lines.some((l) => l.includes('lost every connection')), lines.join(''));
  assert.ok(lines.some((l) => l.includes('rejoined swarm')), lines.join(''));
});
