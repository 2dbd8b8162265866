import type { TestContext } from 'node:test';
import { decode as cborDecode } from 'cborg';
import { z } from 'zod';
import { MAX_MESSAGE_BYTES } from '../../src/swarm/constants.js';
import { createSwarmNode, readToEnd, recordsProtocol, type SwarmInit, type SwarmNode } from '../../src/swarm/index.js';
import { requestOnce } from '../../src/swarm/streams.js';

/** Sends raw bytes as one records-protocol request, as a misbehaving peer would; returns the decoded answer. */
export async function rawRequest(from: SwarmNode, to: SwarmNode, bytes: Uint8Array): Promise<unknown> {
  return requestOnce(from.libp2p, to.peerId, recordsProtocol(from.runId), bytes, (answer): unknown => cborDecode(answer), { maxBytes: MAX_MESSAGE_BYTES, signal: AbortSignal.timeout(30_000) });
}

/** Polls `condition` every 25 ms until it holds; fails with `what` after `timeoutMs`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Loopback-only node, stopped when the test ends. Every peer shares 127.0.0.1, so libp2p's per-host
 * flood guard is raised (as in bench/dht): joins, lookups and AutoNAT dial-backs of a whole test
 * swarm arrive from one address within a second.
 */
export async function startNode(t: TestContext, init: SwarmInit): Promise<SwarmNode> {
  const node = await createSwarmNode({ listen: ['/ip4/127.0.0.1/tcp/0'], initialQuerySelfIntervalMs: 50, inboundConnectionsPerHostPerSecond: 100, ...init });
  t.after(() => node.stop());
  return node;
}

/** Schema of the `progress` namespace the tests store (like the optimizer's progress records). */
export const progressSchema = z.strictObject({ samples: z.number().int().nonnegative(), epoch: z.number().int().nonnegative() });

/**
 * `count` DHT servers of one run on loopback: the first is the bootstrap peer of the others. Resolves
 * once every peer serves the DHT (auto mode: AutoNAT confirmed it), every routing table holds at
 * least two others (or all of them, when fewer), and connected peers know each other as servers;
 * each of these waits fails after `timeoutMs` (8 peers in one process on a loaded machine need more).
 */
export async function startSwarm(t: TestContext, count: number, init: Partial<SwarmInit> & { runId: string }, timeoutMs = 15_000): Promise<SwarmNode[]> {
  const first = await startNode(t, init);
  const rest = await Promise.all(Array.from({ length: count - 1 }, () => startNode(t, { ...init, initialPeers: first.multiaddrs() })));
  const nodes = [first, ...rest];
  await waitFor(`${count} peers to serve the DHT`, () => nodes.every((n) => n.reachability === 'public'), timeoutMs);
  await waitFor(`${count} routing tables to fill`, () => nodes.map((n) => n.stats()).every((s) => s.routingTableSize >= Math.min(count - 1, 2)), timeoutMs);
  // identify-push has told every connected peer that the others serve now (none is still seen as a client)
  await waitFor('every peer to be seen as a server', () => nodes.every((n) => nodes.every((m) => m === n || n.libp2p.getConnections(m.peerId).length === 0 || n.isClientMode(m.peerId) === false)), timeoutMs);
  return nodes;
}

/**
 * `from` sends `text` to `to` at `addr` on a fresh connection (an echo protocol `to` serves for the
 * call); resolves with what came back and, per echo stream `to` served, the address it came from.
 */
export async function echoVia(from: SwarmNode, to: SwarmNode, addr: string, text: string): Promise<{ echoed: string; seenFrom: string[] }> {
  const seenFrom: string[] = [];
  await to.handle('echo/1.0.0', async (stream, connection) => {
    seenFrom.push(connection.remoteAddr.toString());
    stream.send(await readToEnd(stream, { maxBytes: 1024 }));
    await stream.close();
  });
  try {
    const stream = await from.dial(addr, 'echo/1.0.0', { newConnection: true });
    stream.send(new TextEncoder().encode(text));
    await stream.close();
    return { echoed: new TextDecoder().decode(await readToEnd(stream, { maxBytes: 1024 })), seenFrom };
  } finally {
    await to.unhandle('echo/1.0.0');
  }
}
