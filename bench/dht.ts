// DHT records and stream throughput on loopback (in-process peers).
//   npm run bench -- dht [--quick] [--streams-only]
// Human-readable lines, then one JSON object as the last line: store/get latency (median, p90, ms)
// with 10 and 50 peers, and libp2p stream throughput (tcp + noise or tls + yamux) against a raw TCP
// socket moving the same bytes in the same rounds (`stream_vs_tcp` = libp2p ÷ raw TCP, for the
// default encryption; `noise_vs_tcp`, `tls_vs_tcp` for each).
import net from 'node:net';
import { byteStream } from '@libp2p/utils';
import { z } from 'zod';
import type { Encryption } from '../src/swarm/config.js';
import { DEFAULT_ENCRYPTION } from '../src/swarm/constants.js';
import { createSwarmNode, type SwarmNode } from '../src/swarm/index.js';
import { median, reportJson } from './_report.js';

const quick = process.argv.includes('--quick');
const OPS = quick ? 10 : 20;
const STREAM_BYTES = (quick ? 64 : 128) * 1024 * 1024;
const CHUNK = 64 * 1024;
const ROUNDS = quick ? 1 : 3;

const schema = z.strictObject({ samples: z.number().int(), epoch: z.number().int() });

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function p90(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.9))]!;
}

async function recordLatency(peers: number): Promise<{ store: number[]; get: number[] }> {
  // every peer is on 127.0.0.1: lift the per-IP inbound connection limit meant for the internet
  const init = { runId: `bench-${peers}`, listen: ['/ip4/127.0.0.1/tcp/0'], initialQuerySelfIntervalMs: 50, inboundConnectionsPerHostPerSecond: 1000 };
  const first = await createSwarmNode(init);
  const nodes: SwarmNode[] = [first];
  try {
    // Peers join in small batches, each routable before the next starts: 50 simultaneous
    // handshakes on 2 cores time out identify, which a real swarm (peers arriving over time) never sees.
    for (let i = 1; i < peers; i += 5) {
      const batch = await Promise.all(Array.from({ length: Math.min(5, peers - i) }, () => createSwarmNode({ ...init, initialPeers: first.multiaddrs() })));
      nodes.push(...batch);
      await Promise.all(batch.map((n) => n.ready));
      await waitFor(`peers ${i}–${i + batch.length - 1} to be routable`, () => batch.every((n) => n.stats().routingTableSize >= 1), 30_000);
    }
    const ns = nodes.map((n) => n.registerNamespace('progress', schema));
    const store: number[] = [];
    const get: number[] = [];
    for (let i = 0; i < OPS; i++) {
      const writer = ns[(i * 7) % peers]!;
      const reader = ns[(i * 13 + 5) % peers]!;
      let t = performance.now();
      const result = await writer.store(`progress/${i}`, '', { samples: i, epoch: 1 }, Date.now() + 60_000);
      store.push(performance.now() - t);
      if (result.replicas === 0) throw new Error(`store ${i} reached no replica`);
      t = performance.now();
      const got = await reader.get(`progress/${i}`);
      get.push(performance.now() - t);
      if ([...got.values()][0]?.value.samples !== i) throw new Error(`get ${i} did not find the stored record`);
    }
    return { store, get };
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
}

/** Bytes per second through one libp2p stream (tcp + noise + yamux), honouring backpressure. */
async function libp2pThroughput(a: SwarmNode, b: SwarmNode): Promise<number> {
  const t = performance.now();
  const stream = await b.dial(a.peerId, 'bench-sink/1.0.0');
  const chunk = new Uint8Array(CHUNK).fill(7);
  for (let sent = 0; sent < STREAM_BYTES; sent += CHUNK) {
    if (!stream.send(chunk)) await stream.onDrain();
  }
  await stream.close();
  const ack = await byteStream(stream).read();
  if (ack === null || ack.byteLength !== 8 || Number(Buffer.from(ack.subarray()).readBigUInt64BE()) !== STREAM_BYTES) throw new Error('sink did not confirm every byte');
  return STREAM_BYTES / ((performance.now() - t) / 1000);
}

async function tcpThroughput(): Promise<number> {
  const server = net.createServer((socket) => {
    let received = 0;
    socket.on('data', (d: Buffer) => (received += d.length));
    socket.on('end', () => {
      const ack = Buffer.alloc(8);
      ack.writeBigUInt64BE(BigInt(received));
      socket.end(ack);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  try {
    const t = performance.now();
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const chunk = Buffer.alloc(CHUNK, 7);
    for (let sent = 0; sent < STREAM_BYTES; sent += CHUNK) {
      if (!socket.write(chunk)) await new Promise((resolve) => socket.once('drain', resolve));
    }
    const acked = new Promise<Buffer>((resolve) => {
      const parts: Buffer[] = [];
      socket.on('data', (d: Buffer) => parts.push(d));
      socket.on('end', () => resolve(Buffer.concat(parts)));
    });
    socket.end();
    if (Number((await acked).readBigUInt64BE()) !== STREAM_BYTES) throw new Error('raw TCP sink did not confirm every byte');
    return STREAM_BYTES / ((performance.now() - t) / 1000);
  } finally {
    server.close();
  }
}

async function sinkPair(encryption: Encryption): Promise<[SwarmNode, SwarmNode]> {
  const init = { runId: `bench-stream-${encryption}`, listen: ['/ip4/127.0.0.1/tcp/0'], encryption };
  const a = await createSwarmNode(init);
  const b = await createSwarmNode({ ...init, initialPeers: a.multiaddrs() });
  await b.ready;
  await a.handle('bench-sink/1.0.0', async (stream) => {
    // Count bytes as they are dispatched (no buffering), until the sender closes its side.
    let received = 0;
    stream.addEventListener('message', (event) => (received += event.data.byteLength));
    if (stream.remoteWriteStatus === 'writable') await new Promise((resolve) => stream.addEventListener('remoteCloseWrite', resolve, { once: true }));
    const ack = Buffer.alloc(8);
    ack.writeBigUInt64BE(BigInt(received));
    stream.send(ack);
    await stream.close();
  });
  return [a, b];
}

/** Raw TCP, Noise and TLS interleaved round by round, so machine noise hits all three alike. */
async function throughput(): Promise<Record<'tcp' | Encryption, number>> {
  const pairs = { noise: await sinkPair('noise'), tls: await sinkPair('tls') };
  try {
    const runs: Record<'tcp' | Encryption, number[]> = { tcp: [], noise: [], tls: [] };
    for (let round = 0; round < ROUNDS; round++) {
      runs.tcp.push(await tcpThroughput());
      for (const e of ['noise', 'tls'] as const) runs[e].push(await libp2pThroughput(...pairs[e]));
    }
    return { tcp: median(runs.tcp), noise: median(runs.noise), tls: median(runs.tls) };
  } finally {
    await Promise.all(Object.values(pairs).flat().map((n) => n.stop()));
  }
}

const figures: Record<string, number> = {};
for (const peers of process.argv.includes('--streams-only') ? [] : [10, 50]) {
  const started = performance.now();
  const { store, get } = await recordLatency(peers);
  console.log(`${peers} peers: store median ${median(store).toFixed(1)} ms (p90 ${p90(store).toFixed(1)}), get median ${median(get).toFixed(1)} ms (p90 ${p90(get).toFixed(1)}) over ${OPS} keys [${((performance.now() - started) / 1000).toFixed(1)} s incl. startup]`);
  Object.assign(figures, {
    [`store_ms_median_${peers}`]: +median(store).toFixed(2),
    [`store_ms_p90_${peers}`]: +p90(store).toFixed(2),
    [`get_ms_median_${peers}`]: +median(get).toFixed(2),
    [`get_ms_p90_${peers}`]: +p90(get).toFixed(2),
  });
}
const mib = (x: number): string => (x / 1024 / 1024).toFixed(0);
const rates = await throughput();
const streams: Record<string, number> = { tcp_mib_s: +(rates.tcp / 1024 / 1024).toFixed(1) };
for (const encryption of ['noise', 'tls'] as const) {
  console.log(`stream throughput, ${mib(STREAM_BYTES)} MiB × ${ROUNDS} rounds: tcp+${encryption}+yamux ${mib(rates[encryption])} MiB/s vs raw TCP ${mib(rates.tcp)} MiB/s (ratio ${(rates[encryption] / rates.tcp).toFixed(3)})`);
  streams[`${encryption}_mib_s`] = +(rates[encryption] / 1024 / 1024).toFixed(1);
  streams[`${encryption}_vs_tcp`] = +(rates[encryption] / rates.tcp).toFixed(3);
}
reportJson({
  ...figures,
  ...streams,
  encryption_default: DEFAULT_ENCRYPTION,
  // the default encryption's libp2p stream throughput ÷ raw TCP throughput
  stream_vs_tcp: streams[`${DEFAULT_ENCRYPTION}_vs_tcp`]!,
});
