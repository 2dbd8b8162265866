// One peer of the all-reduce benchmark (a child process, possibly inside a network namespace).
// argv[2]: JSON { mode: 'cohort' | 'tcp' | 'tls', host, initialPeers?, n, values, runId }.
// stdout: one JSON line when listening ({ addr }), then one per round; stdin: one JSON line per round.
//   cohort: { epoch, compression, bandwidth? (declared, bytes/s), label? (names the averager) } → { ms, status, bytes, cpuMs }   (ms: the all-reduce, without matchmaking;
//           cpuMs: this process's CPU time over the whole step, matchmaking included)
//   tcp:    { peers: [host:port…] } → { ms }                  (the same bytes over raw sockets)
//   tls:    the same over Node's TLS 1.3 sockets (the node's libp2p certificate): what encryption alone costs
import net from 'node:net';
import tls from 'node:tls';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { pino } from 'pino';
import readline from 'node:readline';
import { createAverager, type Averager, type Compression } from '../src/averaging/index.js';
import { createSwarmNode, ENCRYPTIONS, type Encryption } from '../src/swarm/index.js';
import { TlsCredentials } from '../src/swarm/tls-credentials.js';

interface Config {
  mode: 'cohort' | 'tcp' | 'tls';
  host: string;
  initialPeers?: string[];
  n: number;
  values: number;
  runId: string;
}
const cfg = JSON.parse(process.argv[2] ?? '{}') as Config;
const encryption = process.env.COHORT_BENCH_ENCRYPTION;
if (encryption !== undefined && !(ENCRYPTIONS as readonly string[]).includes(encryption)) throw new Error(`COHORT_BENCH_ENCRYPTION must be one of ${ENCRYPTIONS.join(', ')}, got ${encryption}`);
const say = (message: unknown): boolean => process.stdout.write(JSON.stringify(message) + '\n');
const lines = readline.createInterface({ input: process.stdin });

if (cfg.mode === 'cohort') {
  // built first: seconds of blocked event loop right after joining would stall identify and the DHT
  const vector = Float32Array.from({ length: cfg.values }, (_, i) => Math.sin(i));
  const node = await createSwarmNode({ runId: cfg.runId, listen: [`/ip4/${cfg.host}/tcp/0`], initialPeers: cfg.initialPeers ?? [], initialQuerySelfIntervalMs: 50, ...(encryption === undefined ? {} : { encryption: encryption as Encryption }) });
  await node.ready;
  const averagers = new Map<string, Averager>();
  say({ addr: node.multiaddrs().find((a) => a.includes(cfg.host)) });
  for await (const line of lines) {
    const { epoch, compression, bandwidth, label } = JSON.parse(line) as { epoch: number; compression: Compression; bandwidth?: number; label?: string };
    // one averager per compression and label (the peers' declared bandwidths differ, so it names the mode), all on the node's warm connections
    const prefix = `bench-${compression}${label === undefined ? '' : `-${label}`}`;
    let averager = averagers.get(prefix);
    if (averager === undefined) {
      averager = createAverager(node, {
        prefix,
        compression,
        ...(bandwidth === undefined ? {} : { bandwidthBytesPerS: bandwidth }),
        targetGroupSize: cfg.n,
        minGroupSize: cfg.n,
        matchmakingTimeMs: 60_000,
        averagingExpirationMs: 90_000,
        averagingTimeoutMs: 120_000,
        senderTimeoutMs: 30_000,
        reducerTimeoutMs: 40_000,
        log: pino({ level: 'warn', base: { peer: node.peerId.toString().slice(-6) } }, pino.destination(2)),
      });
      averagers.set(prefix, averager);
    }
    const cpu = process.cpuUsage();
    const result = await averager.step(vector, { epoch, weight: 1 });
    const { user, system } = process.cpuUsage(cpu);
    say(result.ok ? { ms: result.durationMs, status: result.status, bytes: result.bytesSent + result.bytesReceived, cpuMs: (user + system) / 1000 } : { error: result.reason });
  }
  await Promise.all([...averagers.values()].map((a) => a.stop()));
  await node.stop();
} else {
  // each peer sends its slice of every other peer's part and gets it straight back (an echo), the
  // butterfly's traffic pattern with nothing on top of TCP (or of TLS)
  const slice = Buffer.alloc(Math.floor((cfg.values * 4) / cfg.n), 7);
  const credentials = cfg.mode === 'tls' ? new TlsCredentials(await generateKeyPair('Ed25519')) : undefined;
  const echo = (socket: net.Socket): void => void socket.pipe(socket);
  const server = credentials === undefined ? net.createServer(echo) : tls.createServer({ ...(await credentials.identity()), minVersion: 'TLSv1.3' }, echo);
  const client = credentials === undefined ? undefined : await credentials.context('client');
  await new Promise<void>((resolve) => server.listen(0, cfg.host, resolve));
  say({ addr: `${cfg.host}:${(server.address() as net.AddressInfo).port}` });
  for await (const line of lines) {
    const { peers } = JSON.parse(line) as { peers: string[] };
    const started = performance.now();
    await Promise.all(
      peers.map(
        (peer) =>
          new Promise<void>((resolve, reject) => {
            const [host, port] = peer.split(':');
            const socket =
              client === undefined
                ? net.connect(Number(port), host, () => socket.end(slice))
                : tls.connect({ port: Number(port), host, secureContext: client, rejectUnauthorized: false }, () => socket.end(slice));
            let got = 0;
            socket.on('data', (d: Buffer) => (got += d.byteLength));
            socket.on('end', () => (got === slice.byteLength ? resolve() : reject(new Error(`echo from ${peer}: ${got} of ${slice.byteLength} bytes`))));
            socket.on('error', reject);
          }),
      ),
    );
    say({ ms: performance.now() - started });
  }
  server.close();
}
