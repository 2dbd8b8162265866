// Shard exchange throughput on loopback: one seeder, 4 newcomers with empty stores each fetching the
// whole dataset (64 MB of shards) at once over the shard exchange (SHARDS_PROTOCOL), against raw TCP moving the same bytes
// (one server writing 64 MB to each of 4 clients) in the same process and run, and against bare libp2p
// streams over the same connections (what the transport allows before any protocol).
// COHORT_BENCH_SHARDS_MB sets the dataset size (default 64); COHORT_BENCH_ENCRYPTION=native-tls|tls|noise
// secures the peers' connections so (default: the swarm's default). Goal: shards_vs_tcp ≥ 0.5.
// Last line: one JSON object; `shard_mb_s` = aggregate MB/s over the 4 newcomers; `*_cpu_s_per_gb` =
// process CPU-seconds (all threads) per GB each phase moved, steadier than MB/s on a loaded machine.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { drained } from '../src/averaging/framing.js';
import { DatasetStore } from '../src/data/dataset-store.js';
import { Prng } from '../src/data/prng.js';
import { ALBERT_SPECIALS } from '../src/data/special-tokens.js';
import { wordPieceTokenizerJson } from '../src/data/train-wordpiece.js';
import { ShardServer, fetchDataset, holdingsOf } from '../src/shards/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { DEFAULT_ENCRYPTION, ENCRYPTIONS, createSwarmNode, type Encryption, type SwarmNode } from '../src/swarm/index.js';
import { reportJson } from './_report.js';

const DATASET_MB = Number(process.env.COHORT_BENCH_SHARDS_MB ?? 64);
const NEWCOMERS = 4;
const SEQ = 512;
/** Token ids of the synthetic shards (and entries of their tokenizer.json). */
const VOCAB = 30000;
const EXAMPLES_PER_SHARD = 2048; // ≈ 2 MB per shard (uint16 ids), as `prepare` writes them at length 512
const log = pino({ level: 'silent' });
const ENCRYPTION = (process.env.COHORT_BENCH_ENCRYPTION ?? DEFAULT_ENCRYPTION) as Encryption;
if (!ENCRYPTIONS.includes(ENCRYPTION)) throw new Error(`COHORT_BENCH_ENCRYPTION must be one of ${ENCRYPTIONS.join(', ')}, got ${ENCRYPTION}`);

/** Process CPU-seconds (every thread) and wall seconds of `run`: under a shared machine's load, CPU per GB moved varies less than MB/s. */
async function measured<T>(run: () => Promise<T>): Promise<{ result: T; seconds: number; cpuSeconds: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const result = await run();
  const { user, system } = process.cpuUsage(cpu0);
  return { result, seconds: (performance.now() - t0) / 1000, cpuSeconds: (user + system) / 1e6 };
}

/** `promise`, or an error after `ms` (a phase that stalls fails the benchmark instead of hanging it). */
function bounded<T>(what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took over ${ms / 1000} s`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A dataset of random token ids in the real shard format (preparing 64 MB of text would take minutes here). */
function seedDataset(store: Store, dir: string): { datasetId: string; bytes: number; shards: number } {
  const datasets = new DatasetStore(store.db);
  const tokenizerFile = path.join(dir, 'tokenizer.json');
  // a real tokenizer.json of the shards' vocabulary: a fetcher checks the manifest's vocabSize against it
  fs.writeFileSync(tokenizerFile, JSON.stringify(wordPieceTokenizerJson([...ALBERT_SPECIALS.map(([t]) => t), ...Array.from({ length: VOCAB - ALBERT_SPECIALS.length }, (_, i) => `t${i}`)])));
  const tokenizerHash = createHashHex(fs.readFileSync(tokenizerFile));
  const params = { maxSeqLen: SEQ, shortSeqProb: 0.1, seed: 0, format: 'bench', field: '', maxDocuments: null };
  datasets.begin({ cacheKey: 'bench', source: 'bench', datasetHash: 'bench', tokenizerHash, tokenizerFile, params, vocabSize: VOCAB });
  const rng = new Prng('bench-shards');
  const ids = (n: number) => Array.from({ length: n }, () => rng.int(5, VOCAB));
  let bytes = 0;
  let shards = 0;
  let examples = 0;
  let tokens = 0;
  while (bytes < DATASET_MB * 1024 ** 2) {
    const batch = Array.from({ length: EXAMPLES_PER_SHARD }, () => ({ a: ids(254), b: ids(255), sop: rng.int(0, 2) as 0 | 1 }));
    const written = datasets.writeShard('bench', shards++, batch, VOCAB);
    bytes += written.bytes;
    tokens += written.tokens;
    examples += batch.length;
  }
  datasets.finish('bench', { documents: 0, sentences: 0, examples, tokens, shardCount: shards });
  return { datasetId: datasets.get('bench')!.datasetId!, bytes, shards };
}

function createHashHex(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Raw TCP: one server sends `bytes` to each of `clients` concurrent connections; MB/s over all of them. */
async function tcpBaseline(bytes: number, clients: number): Promise<number> {
  const block = Buffer.alloc(256 * 1024, 7);
  const server = net.createServer((socket) => {
    let left = bytes;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(block.length, left);
        left -= n;
        if (!socket.write(n === block.length ? block : block.subarray(0, n))) return void socket.once('drain', pump);
      }
      socket.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, () =>
      new Promise<void>((resolve, reject) => {
        let got = 0;
        const socket = net.connect(port, '127.0.0.1');
        socket.on('data', (d) => (got += d.length));
        socket.on('error', reject);
        socket.on('end', () => (got === bytes ? resolve() : reject(new Error(`got ${got} of ${bytes} bytes`))));
      }),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  server.close();
  return (clients * bytes) / 1024 ** 2 / seconds;
}

/** The ceiling the transport sets: the seeder sends `bytes` on one bare stream to each newcomer at once; MB/s over all of them. */
async function bareLibp2p(seeder: SwarmNode, newcomers: readonly SwarmNode[], bytes: number): Promise<number> {
  const block = new Uint8Array(256 * 1024);
  await seeder.handle('bench-bare/1.0.0', async (stream) => {
    for (let left = bytes; left > 0; left -= block.length) if (!stream.send(left >= block.length ? block : block.subarray(0, left))) await drained(stream, undefined, 'the bare stream');
    await stream.close();
  });
  const t0 = performance.now();
  await Promise.all(
    newcomers.map(async (n) => {
      const stream = await n.dial(seeder.peerId, 'bench-bare/1.0.0');
      let got = 0;
      stream.addEventListener('message', (e) => (got += e.data.byteLength));
      if (stream.remoteWriteStatus === 'writable') await new Promise((resolve) => stream.addEventListener('remoteCloseWrite', resolve, { once: true }));
      if (got !== bytes) throw new Error(`bare stream delivered ${got} of ${bytes} bytes`);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await seeder.unhandle('bench-bare/1.0.0');
  return (newcomers.length * bytes) / 1024 ** 2 / seconds;
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-shards-'));
const nodes: SwarmNode[] = [];
const stores: Store[] = [];
try {
  const init = { runId: 'bench-shards', listen: ['/ip4/127.0.0.1/tcp/0'], initialQuerySelfIntervalMs: 50, inboundConnectionsPerHostPerSecond: 1000, encryption: ENCRYPTION };
  const seeder = await createSwarmNode(init);
  nodes.push(seeder);
  const newcomers = await Promise.all(Array.from({ length: NEWCOMERS }, () => createSwarmNode({ ...init, initialPeers: seeder.multiaddrs() })));
  nodes.push(...newcomers);
  await Promise.all(nodes.map((n) => n.ready));
  await waitFor('routing tables', () => nodes.every((n) => n.stats().routingTableSize >= 1), 30_000);

  const dirs = nodes.map((_, i) => path.join(root, `peer-${i}`));
  for (const d of dirs) fs.mkdirSync(d);
  stores.push(...dirs.map((d) => openStore(d)));
  const seeded = seedDataset(stores[0]!, dirs[0]!);
  console.log(`encryption: ${ENCRYPTION}`);
  console.log(`dataset: ${seeded.shards} shards, ${(seeded.bytes / 1024 ** 2).toFixed(1)} MB (random token ids, shard format CDS1), id ${seeded.datasetId.slice(0, 16)}…`);
  const server = new ShardServer(seeder, stores[0]!, log, { maxConcurrentTransfers: 2 * NEWCOMERS });
  await server.start();
  await waitFor('every newcomer to see the seeder in the DHT', async () => {
    const seen = await Promise.all(newcomers.map(async (n) => (await holdingsOf(n).get(`shards/${seeded.datasetId}`)).size > 0));
    return seen.every(Boolean);
  }, 30_000);

  const moved = (NEWCOMERS * seeded.bytes) / 1024 ** 3; // GB moved by each phase
  const cpuPerGb = (cpuSeconds: number) => Number((cpuSeconds / moved).toFixed(1));
  const exchange = await measured(() =>
    bounded('the shard exchange', Promise.all(newcomers.map((node, i) => fetchDataset(node, stores[i + 1]!, { datasetId: seeded.datasetId, dataDir: dirs[i + 1]!, maxParallel: 2, log }))), 600_000),
  );
  const { seconds } = exchange;
  for (const r of exchange.result) if (r.bytes !== seeded.bytes || r.info.datasetId !== seeded.datasetId) throw new Error(`a newcomer got ${r.bytes} of ${seeded.bytes} bytes`);
  const shardMbS = (NEWCOMERS * seeded.bytes) / 1024 ** 2 / seconds;
  console.log(`shard exchange: ${NEWCOMERS} newcomers × ${(seeded.bytes / 1024 ** 2).toFixed(1)} MB in ${seconds.toFixed(2)} s = ${shardMbS.toFixed(1)} MB/s aggregate, ${cpuPerGb(exchange.cpuSeconds)} CPU-s/GB (TLS + yamux, sha256 per shard, SQLite writes, all peers in one process)`);
  const bare = await measured(() => bounded('the bare libp2p streams', bareLibp2p(seeder, newcomers, seeded.bytes), 300_000));
  const bareMbS = bare.result;
  console.log(`bare libp2p streams (same connections, no protocol on top), same bytes and clients: ${bareMbS.toFixed(1)} MB/s aggregate, ${cpuPerGb(bare.cpuSeconds)} CPU-s/GB`);
  const tcp = await measured(() => bounded('raw TCP', tcpBaseline(seeded.bytes, NEWCOMERS), 300_000));
  const tcpMbS = tcp.result;
  console.log(`raw TCP, same bytes and clients: ${tcpMbS.toFixed(1)} MB/s aggregate, ${cpuPerGb(tcp.cpuSeconds)} CPU-s/GB`);
  const ratio = shardMbS / tcpMbS;
  console.log(`shards_vs_tcp ${ratio.toFixed(3)} (goal ≥ 0.5); the transport alone: libp2p_vs_tcp ${(bareMbS / tcpMbS).toFixed(3)}`);
  reportJson({
    shard_mb_s: Number(shardMbS.toFixed(1)),
    libp2p_mb_s: Number(bareMbS.toFixed(1)),
    tcp_mb_s: Number(tcpMbS.toFixed(1)),
    libp2p_vs_tcp: Number((bareMbS / tcpMbS).toFixed(3)),
    shards_vs_tcp: Number(ratio.toFixed(3)),
    shard_cpu_s_per_gb: cpuPerGb(exchange.cpuSeconds),
    libp2p_cpu_s_per_gb: cpuPerGb(bare.cpuSeconds),
    tcp_cpu_s_per_gb: cpuPerGb(tcp.cpuSeconds),
    dataset_mb: Number((seeded.bytes / 1024 ** 2).toFixed(1)),
    encryption: ENCRYPTION,
    newcomers: NEWCOMERS,
    seconds: Number(seconds.toFixed(2)),
  });
  await server.stop();
} finally {
  await Promise.all(nodes.map((n) => n.stop()));
  for (const s of stores) s.close();
  fs.rmSync(root, { recursive: true, force: true });
}
