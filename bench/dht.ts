// DHT records and stream throughput on loopback (in-process peers).
//   npm run bench -- dht [--quick] [--streams-only | --records-only] [--peers 10,25,50]
// Human-readable lines, then one JSON object as the last line: store/get latency (median, p90, ms)
// and success with 10, 50 and 256 peers (--quick: 10 and 50; --peers: these; `dht_256_get_ms`,
// `dht_256_success`), the same for a key stored and read again by the same two peers
// (`store_repeat_ms_median_<n>`, `get_repeat_ms_median_<n>`, p90s, `success_repeat_<n>`), `joined_<n>` (peers routable: n, or how far a swarm that did not start got),
// `dials_per_op_<n>` (connections a first store or get opened: its lookup's dials), `startup_cpu_s_<n>` (CPU seconds to start the swarm: steadier than wall time on a shared machine),
// and libp2p stream throughput (a direct connection: TCP + TLS 1.3 on the socket + yamux) against a raw TCP socket moving the same bytes in the same rounds
// (`stream_vs_tcp` = libp2p ÷ raw TCP).
import net from 'node:net';
import { parseArgs } from 'node:util';
import { byteStream } from '@libp2p/utils';
import { drained } from '../src/averaging/framing.js';
import { createSwarmNode, type SwarmNode } from '../src/swarm/index.js';
import { describeDht, measureDht, p90 } from './_dht-swarm.js';
import { median, reportJson } from './_report.js';

const { values: opt } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, 'streams-only': { type: 'boolean', default: false }, 'records-only': { type: 'boolean', default: false }, peers: { type: 'string' } },
});
const quick = opt.quick;
const OPS = quick ? 10 : 20;
const STREAM_BYTES = (quick ? 64 : 128) * 1024 * 1024;
const CHUNK = 64 * 1024;
const ROUNDS = quick ? 1 : 3;

/** Bytes per second through one libp2p stream (TCP + TLS + yamux), honouring backpressure. */
async function libp2pThroughput(a: SwarmNode, b: SwarmNode): Promise<number> {
  const t = performance.now();
  const stream = await b.dial(a.peerId, 'bench-sink/1.0.0');
  const chunk = new Uint8Array(CHUNK).fill(7);
  for (let sent = 0; sent < STREAM_BYTES; sent += CHUNK) {
    if (!stream.send(chunk)) await drained(stream, undefined, 'the bench stream');
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

async function sinkPair(): Promise<[SwarmNode, SwarmNode]> {
  const init = { runId: 'bench-stream', listen: ['/ip4/127.0.0.1/tcp/0'] };
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

/** Raw TCP and libp2p interleaved round by round, so machine noise hits both alike. */
async function throughput(): Promise<{ tcp: number; libp2p: number }> {
  const pair = await sinkPair();
  try {
    const runs = { tcp: [] as number[], libp2p: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      runs.tcp.push(await tcpThroughput());
      runs.libp2p.push(await libp2pThroughput(...pair));
    }
    return { tcp: median(runs.tcp), libp2p: median(runs.libp2p) };
  } finally {
    await Promise.all(pair.map((n) => n.stop()));
  }
}

const figures: Record<string, number | null> = {};
function peerCounts(list: string): number[] {
  const counts = list.split(',').map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 2 || n > 1024)) throw new Error(`--peers must be a comma-separated list of peer counts from 2 to 1024, got ${list}`);
  return counts;
}
const sizes = opt['streams-only'] ? [] : opt.peers !== undefined ? peerCounts(opt.peers) : quick ? [10, 50] : [10, 50, 256];
for (const peers of sizes) {
  const f = await measureDht(peers, OPS);
  console.log(describeDht(f));
  figures[`joined_${peers}`] = f.joined;
  figures[`startup_cpu_s_${peers}`] = +f.startupCpuS.toFixed(1);
  if (f.failed !== undefined) {
    figures[`success_${peers}`] = 0;
    continue;
  }
  Object.assign(figures, {
    [`store_ms_median_${peers}`]: +median(f.store).toFixed(2),
    [`store_ms_p90_${peers}`]: +p90(f.store).toFixed(2),
    [`get_ms_median_${peers}`]: +median(f.get).toFixed(2),
    [`get_ms_p90_${peers}`]: +p90(f.get).toFixed(2),
    [`success_${peers}`]: f.success,
    [`store_repeat_ms_median_${peers}`]: +median(f.storeRepeat).toFixed(2),
    [`store_repeat_ms_p90_${peers}`]: +p90(f.storeRepeat).toFixed(2),
    [`get_repeat_ms_median_${peers}`]: +median(f.getRepeat).toFixed(2),
    [`get_repeat_ms_p90_${peers}`]: +p90(f.getRepeat).toFixed(2),
    [`success_repeat_${peers}`]: f.successRepeat,
    [`dials_per_op_${peers}`]: +f.dialsPerOp.toFixed(1),
  });
}
if (sizes.includes(256)) {
  // hivemind's published figures (1024 peers in one process, no encryption, no emulated latency)
  console.log(`hivemind, 1024 peers: store 14.9 ms mean, get 6.6 ms mean, success 1.0; here, 256 peers: store ${figures.store_ms_median_256 ?? '-'} ms, get ${figures.get_ms_median_256 ?? '-'} ms median, success ${figures.success_256}`);
  // null: the 256-peer swarm did not start (joined_256 says how far it got)
  Object.assign(figures, { dht_256_get_ms: figures.get_ms_median_256 ?? null, dht_256_get_ms_p90: figures.get_ms_p90_256 ?? null, dht_256_success: figures.success_256! });
}
const mib = (x: number): string => (x / 1024 / 1024).toFixed(0);
if (opt['records-only']) {
  reportJson(figures);
  process.exit(0);
}
const rates = await throughput();
console.log(`stream throughput, ${mib(STREAM_BYTES)} MiB × ${ROUNDS} rounds: tcp+tls+yamux ${mib(rates.libp2p)} MiB/s vs raw TCP ${mib(rates.tcp)} MiB/s (ratio ${(rates.libp2p / rates.tcp).toFixed(3)})`);
reportJson({
  ...figures,
  tcp_mib_s: +(rates.tcp / 1024 / 1024).toFixed(1),
  stream_mib_s: +(rates.libp2p / 1024 / 1024).toFixed(1),
  // a libp2p stream's throughput ÷ raw TCP throughput
  stream_vs_tcp: +(rates.libp2p / rates.tcp).toFixed(3),
});
