// kad-dht adds a connected peer to its routing table once: when identify first reports the peer's DHT
// protocol, and only if a ping answers then. In bench dht, 1–2 of 5 joiners of a 30–100 peer swarm
// in one process stayed connected to their DHT server with an empty routing table for good, the
// server's answer to that ping (or identify) having timed out on the loaded machine. A joiner in client mode
// (nobody queries it, which would also add the server) shows it with one server whose answers stall.
import assert from 'node:assert/strict';
import test from 'node:test';
import type { StreamHandler, StreamHandlerOptions } from '@libp2p/interface';
import { REJOIN_CHECK_MS } from '../../src/swarm/constants.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { startNode, waitFor } from '../helpers/swarm.js';

function registrar(node: SwarmNode): { getHandler(protocol: string): { handler: StreamHandler; options: StreamHandlerOptions } } {
  return (node.libp2p as unknown as { components: { registrar: ReturnType<typeof registrar> } }).components.registrar;
}

const PING = '/ipfs/ping/1.0.0';
const IDENTIFY = '/ipfs/id/1.0.0';

test('a joiner whose first ping of its one DHT server went unanswered adds the server to its routing table once it answers', { timeout: 60_000 }, async (t) => {
  const runId = 'routing-refill';
  const server = await startNode(t, { runId, reachability: 'public' });
  // Replacing the handler (not removing it) leaves the server's protocol list as it was, so
  // identify-push tells the joiner nothing when it answers again.
  const { handler, options } = registrar(server).getHandler(PING);
  await server.libp2p.handle(PING, () => undefined, { ...options, force: true });
  const joiner = await startNode(t, { runId, clientMode: true, initialPeers: server.multiaddrs() });
  // kad-dht's new-contact ping gives up after 5 s
  await new Promise((r) => setTimeout(r, 7000));
  assert.equal(joiner.libp2p.getConnections(server.peerId).length, 1, 'the joiner is connected to the server');
  assert.equal(joiner.stats().routingTableSize, 0, 'kad-dht left the server out: its ping went unanswered');
  await server.libp2p.handle(PING, handler, { ...options, force: true });
  await waitFor("the server in the joiner's routing table", () => joiner.stats().routingTableSize === 1, 2 * REJOIN_CHECK_MS + 5000);
});

test('a joiner whose identify of its one DHT server went unanswered identifies it again and adds it to its routing table', { timeout: 90_000 }, async (t) => {
  const runId = 'routing-refill-identify';
  const server = await startNode(t, { runId, reachability: 'public' });
  // The server's first address update is pushed to its peers (identify-push), which would tell the
  // joiner what its lost identify did not: it is waited out before the joiner connects.
  await waitFor("the server's own addresses in its peer store", async () => (await server.libp2p.peerStore.get(server.peerId)).addresses.length > 0);
  await new Promise((r) => setTimeout(r, 1000));
  const { handler, options } = registrar(server).getHandler(IDENTIFY);
  let unanswered = 0;
  await server.libp2p.handle(IDENTIFY, (stream, connection) => (unanswered++ === 0 ? undefined : handler(stream, connection)), { ...options, force: true });
  const joiner = await startNode(t, { runId, clientMode: true, initialPeers: server.multiaddrs() });
  await waitFor("the joiner's identify of the server to arrive", () => unanswered === 1);
  assert.equal(joiner.isClientMode(server.peerId), undefined, 'the joiner does not know yet whether the server serves the DHT');
  await waitFor("the server in the joiner's routing table", () => joiner.stats().routingTableSize === 1, 45_000);
  assert.equal(joiner.isClientMode(server.peerId), false, 'the joiner identified the server again');
});
