// Time to average ALBERT-large's fp32 gradients (72 MB) among 2, 4 and 8 peers (child processes):
// (a) shaped: each peer in its own network namespace on a bridge the bench creates (10.77.0.0/24),
//     every link 100 Mbit/s each way + 20 ms delay (netem; where the kernel lacks netem, tbf rate only,
//     and the output says so); bound = 2(n−1)/n × size ÷ link rate, efficiency = bound ÷ measured;
//     uncompressed, fp16 and 8-bit (blockwise8);
// (b) loopback: the same all-reduce next to the same traffic pattern over raw TCP sockets, and over
//     Node's TLS 1.3 sockets (encryption's own cost, the ceiling of any encrypted transport), same run;
// (c) load balancing: 4 peers on 1 Gbit/s, 100, 50 and 20 Mbit/s links (a quarter of the volume),
//     every peer declaring the same bandwidth (equal split) against each its link's rate (the LP's split).
// `-- <MB>` changes the volume (default 72); `-- <MB> loopback` runs (b) only, `-- <MB> lb` (c) only.
// COHORT_BENCH_PROFILE=<dir> runs every peer process under `node --cpu-prof` (profiles in <dir>).
// COHORT_BENCH_ENCRYPTION=native-tls|tls|noise secures the peers' connections so (default: the swarm's default).
// Shaped rounds per group size: a first (cold) one, reported apart as efficiency_<n>_cold; then
// uncompressed three times (efficiency_<n>: the median), fp16 and 8-bit on the same, warm, connections.
// Last line: JSON with efficiency_4 (shaped, 4 peers, uncompressed), loopback_vs_tcp_4 (raw TCP
// time ÷ Cohort time on loopback, 4 peers: 1 = as fast as bare sockets) and cpu_s_per_gb_<n> (a
// loopback peer's CPU-seconds per GB of its vector averaged).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { attachToBridge, createBridge, quiet, removeNetns, sh, shape } from './_netns.js';
import { DEFAULT_ENCRYPTION } from '../src/swarm/index.js';
import { reportJson } from './_report.js';

const MB = Number(process.argv[2] ?? 72);
if (!Number.isFinite(MB) || MB <= 0) throw new Error(`volume must be a positive number of MB, got ${process.argv[2]}`);
const only = process.argv[3];
if (only !== undefined && only !== 'loopback' && only !== 'lb') throw new Error(`the second argument must be "loopback" or "lb", got ${only}`);
const VALUES = Math.round((MB * 1e6) / 4);
const LINK_BYTES_PER_S = 100e6 / 8;
const DELAY_MS = 20;
const PEER = path.join(path.dirname(fileURLToPath(import.meta.url)), '_allreduce-peer.ts');
const NS = (i: number): string => `cohortb${i}`;
const BRIDGE = 'cohortbr0';
const ROUND_TIMEOUT_MS = 180_000;
const children = new Set<ChildProcess>();

const NAMES = { prefix: 'cohortb', bridge: BRIDGE, vethPrefix: 'cbv' };

/** Stops the peers and removes every namespace and link this bench creates (also leftovers of an interrupted run). */
function cleanup(): void {
  for (const child of children) child.kill('SIGKILL');
  removeNetns(NAMES);
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    cleanup();
    process.exit(130);
  });
}
process.on('exit', cleanup);

/** Creates `count` namespaces on one bridge, peer i's link shaped to `mbits(i)` Mbit/s each way; returns how. */
function setupNamespaces(count: number, mbits: (i: number) => number = () => 100): 'netem' | 'tbf' {
  for (const child of children) child.kill('SIGKILL');
  createBridge(NAMES);
  let shaping: 'netem' | 'tbf' = 'netem';
  for (let i = 0; i < count; i++) {
    const ns = NS(i);
    const [outer, inner] = [`cbv${i}`, `cbp${i}`];
    attachToBridge(NAMES, ns, i, inner, `10.77.0.${i + 1}/24`);
    // the peer's upload: delay + rate; its download: rate (shaped on the bridge side of its veth)
    const rate = ['rate', `${mbits(i)}mbit`];
    if (shaping === 'netem') {
      try {
        sh('ip', 'netns', 'exec', ns, 'tc', 'qdisc', 'add', 'dev', inner, 'root', 'netem', 'delay', `${DELAY_MS}ms`, ...rate, 'limit', '100000');
        sh('tc', 'qdisc', 'add', 'dev', outer, 'root', 'netem', ...rate, 'limit', '100000');
        continue;
      } catch {
        shaping = 'tbf';
        for (let k = 0; k < i; k++) {
          quiet('ip', 'netns', 'exec', NS(k), 'tc', 'qdisc', 'del', 'dev', `cbp${k}`, 'root');
          quiet('tc', 'qdisc', 'del', 'dev', `cbv${k}`, 'root');
        }
        for (let k = 0; k < i; k++) shapeTbf(NS(k), k, mbits(k));
      }
    }
    shapeTbf(ns, i, mbits(i));
  }
  return shaping;
}

function shapeTbf(ns: string, i: number, mbit: number): void {
  shape(ns, `cbp${i}`, mbit);
  shape(undefined, `cbv${i}`, mbit);
}

interface Peer {
  send(message: unknown): void;
  next(): Promise<Record<string, unknown>>;
}

function startPeer(config: unknown, ns: string | undefined): Peer {
  const profile = process.env.COHORT_BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.COHORT_BENCH_PROFILE}`] : [];
  const node = [process.execPath, ...profile, '--import', 'tsx', PEER, JSON.stringify(config)];
  const child = ns ? spawn('ip', ['netns', 'exec', ns, ...node], { stdio: ['pipe', 'pipe', 'inherit'] }) : spawn(node[0]!, node.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    send: (message) => child.stdin.write(JSON.stringify(message) + '\n'),
    next: async () => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`peer gave no answer within ${ROUND_TIMEOUT_MS} ms`)), ROUND_TIMEOUT_MS)));
      try {
        const line = await Promise.race([lines.next(), timeout]);
        if (line.done) {
          if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
          throw new Error(`peer exited (code ${child.exitCode}, signal ${child.signalCode})`);
        }
        return JSON.parse(line.value) as Record<string, unknown>;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Ends the peers: stdin closed, they stop their nodes and exit (so `node --cpu-prof` writes its profile); killed after 10 s. */
async function stopPeers(): Promise<void> {
  const exits = [...children].map((c) => new Promise((resolve) => c.once('exit', resolve)));
  for (const c of children) c.stdin?.end();
  const kill = setTimeout(() => children.forEach((c) => c.kill('SIGKILL')), 10_000);
  await Promise.all(exits);
  clearTimeout(kill);
}

/** Starts n peers; returns them with their listen addresses. */
async function startPeers(mode: 'cohort' | 'tcp' | 'tls', n: number, shaped: boolean, values: number, runId: string): Promise<{ peers: Peer[]; addrs: string[] }> {
  const host = (i: number): string => (shaped ? `10.77.0.${i + 1}` : '127.0.0.1');
  const ns = (i: number): string | undefined => (shaped ? NS(i) : undefined);
  const first = startPeer({ mode, host: host(0), n, values, runId }, ns(0));
  const addr0 = String((await first.next()).addr);
  const rest = Array.from({ length: n - 1 }, (_, k) => startPeer({ mode, host: host(k + 1), n, values, runId, initialPeers: [addr0] }, ns(k + 1)));
  const addrs = [addr0, ...(await Promise.all(rest.map(async (p) => String((await p.next()).addr))))];
  return { peers: [first, ...rest], addrs };
}

/**
 * One all-reduce of `compression` among the peers: the slowest peer's all-reduce time (ms); `partial`
 * when some part kept local values (a dropped connection: the time then does not measure a full average).
 */
async function cohortRound(peers: Peer[], epoch: number, compression: string, declared?: { label: string; bandwidths: readonly number[] }): Promise<{ ms: number; bytes: number; cpuMs: number; partial: boolean }> {
  peers.forEach((p, i) => p.send({ epoch, compression, ...(declared ? { label: declared.label, bandwidth: declared.bandwidths[i] } : {}) }));
  const answers = await Promise.all(peers.map((p) => p.next()));
  const failed = answers.find((a) => a.error !== undefined);
  if (failed) throw new Error(`all-reduce failed: ${String(failed.error)}`);
  return {
    ms: Math.max(...answers.map((a) => Number(a.ms))),
    bytes: answers.reduce((s, a) => s + Number(a.bytes), 0) / answers.length,
    cpuMs: answers.reduce((s, a) => s + Number(a.cpuMs), 0) / answers.length,
    partial: answers.some((a) => a.status !== 'complete'),
  };
}

async function tcpRound(peers: Peer[], addrs: string[]): Promise<number> {
  peers.forEach((p, i) => p.send({ peers: addrs.filter((_, k) => k !== i) }));
  const answers = await Promise.all(peers.map((p) => p.next()));
  return Math.max(...answers.map((a) => Number(a.ms)));
}

const figures: Record<string, number | string | boolean | null> = { volume_mb: MB };
// COHORT_BENCH_PEERS=4 (or 2,4) narrows the group sizes, e.g. to investigate one case
const sizes = (process.env.COHORT_BENCH_PEERS ?? '2,4,8').split(',').map(Number);
if (!sizes.every((n) => Number.isInteger(n) && n >= 2 && n <= 8)) throw new Error(`COHORT_BENCH_PEERS must list group sizes from 2 to 8, got ${process.env.COHORT_BENCH_PEERS}`);

if (only === undefined || only === 'lb') {
  let shaping: 'netem' | 'tbf' | undefined;
  try {
    shaping = setupNamespaces(Math.max(...sizes));
  } catch (err) {
    console.log(`shaped links unavailable (${(err as Error).message.split('\n')[0]}); needs root with ip netns and tc. Skipping (a) and (c).`);
  }
  if (shaping !== undefined) {
    if (only !== 'lb') figures.shaping = shaping === 'netem' ? `netem ${DELAY_MS} ms + 100 Mbit/s` : 'tbf 100 Mbit/s, no delay (this kernel has no netem)';
    if (only !== 'lb') console.log(`(a) shaped links: ${figures.shaping} per peer, each way; ${MB} MB fp32`);
    for (const n of only === 'lb' ? [] : sizes) {
      // eight peer processes with 72 MB each overload a 2-core machine (event loops stall, libp2p pings
      // fail, connections drop): they average a quarter of the volume, and the output says so
      const values = n === 8 && os.cpus().length < 8 ? Math.round(VALUES / 4) : VALUES;
      if (values !== VALUES) console.log(`  8 peers on ${os.cpus().length} cores: volume reduced to ${((values * 4) / 1e6).toFixed(0)} MB`);
      figures[`shaped_volume_mb_${n}`] = Number(((values * 4) / 1e6).toFixed(1));
      const { peers } = await startPeers('cohort', n, true, values, `bench-shaped-${n}`);
      const boundMs = ((2 * (n - 1)) / n) * ((values * 4) / LINK_BYTES_PER_S) * 1000;
      let epoch = 0;
      const round = async (label: string, compression: string): Promise<number> => {
        const { ms, bytes, partial } = await cohortRound(peers, epoch++, compression);
        if (partial) figures[`shaped_partial_${n}_${label}`] = true;
        console.log(
          `  ${n} peers, ${label.padEnd(16)} ${(ms / 1000).toFixed(2)} s (uncompressed bound ${(boundMs / 1000).toFixed(2)} s) → efficiency ${(boundMs / ms).toFixed(2)}; ${(bytes / 1e6).toFixed(1)} MB on the wire per peer` +
            (partial ? ' — PARTIAL: some parts kept local values (see the warnings above)' : ''),
        );
        return ms;
      };
      const record = (key: string, ms: number): void => {
        figures[`efficiency_${n}${key}`] = Number((boundMs / ms).toFixed(3));
        figures[`shaped_ms_${n}${key}`] = Math.round(ms);
      };
      // the first round of fresh processes is reported apart: a swarm averages every epoch over the
      // connections it keeps. Its extra time is the processes' warm-up, not TCP's: rounds after 8 s
      // idle (cwnd reset) measured the same as back-to-back ones (0.81 vs 0.77–0.84 at 4 peers)
      record('_cold', await round('none, cold', 'none'));
      // then the rounds a swarm repeats every epoch: uncompressed three times, the median counts
      const warm = [await round('none', 'none'), await round('none', 'none'), await round('none', 'none')].sort((a, b) => a - b);
      record('', warm[1]!);
      for (const compression of ['fp16', 'blockwise8']) record(`_${compression}`, await round(compression, compression));
      await stopPeers();
    }
    cleanup();
    await loadBalancing();
  }
}

/**
 * (c) 4 peers on links of 1 Gbit/s, 100, 50 and 20 Mbit/s: the all-reduce with every peer declaring
 * the same bandwidth (an equal split) against each declaring its link's rate (the LP's split), warm,
 * alternated on the same connections; lb_speedup = equal ÷ balanced (each the median of three rounds).
 */
async function loadBalancing(): Promise<void> {
  const mbits = [1000, 100, 50, 20];
  const values = Math.round(VALUES / 4);
  figures.lb_shaping = setupNamespaces(mbits.length, (i) => mbits[i]!);
  console.log(`(c) load balancing: 4 peers on ${mbits.join(' / ')} Mbit/s links, ${((values * 4) / 1e6).toFixed(0)} MB fp32`);
  const { peers } = await startPeers('cohort', mbits.length, true, values, 'bench-lb');
  const declared = { equal: mbits.map(() => 12.5e6), balanced: mbits.map((m) => (m * 1e6) / 8) };
  let epoch = 0;
  const times: Record<keyof typeof declared, number[]> = { equal: [], balanced: [] };
  // a warm-up round of each (connections, JIT, the averagers' first records), then the two alternated
  for (let k = -1; k < 3; k++) {
    for (const split of ['equal', 'balanced'] as const) {
      const { ms, partial } = await cohortRound(peers, epoch++, 'none', { label: split, bandwidths: declared[split] });
      if (partial) figures[`lb_partial_${split}`] = true;
      if (k >= 0) times[split].push(ms);
    }
  }
  const median: Record<string, number> = {};
  for (const split of ['equal', 'balanced'] as const) {
    median[split] = times[split].sort((a, b) => a - b)[1]!;
    figures[`lb_ms_${split}`] = Math.round(median[split]);
    console.log(`  ${split.padEnd(8)} split: ${times[split].map((t) => (t / 1000).toFixed(2)).join(', ')} s (median ${(median[split] / 1000).toFixed(2)} s)`);
  }
  figures.lb_speedup = Number((median.equal! / median.balanced!).toFixed(3));
  console.log(`  lb_speedup ${figures.lb_speedup} (the link model's bound with the slowest peer at 20 Mbit/s: 1.5)`);
  await stopPeers();
  cleanup();
}

if (only !== 'lb') console.log(`(b) loopback: ${MB} MB fp32, Cohort all-reduce (encryption ${process.env.COHORT_BENCH_ENCRYPTION ?? DEFAULT_ENCRYPTION}) vs the same traffic over raw TCP sockets (echo of each peer's slices)`);
for (const n of only === 'lb' ? [] : sizes) {
  const cohort = await startPeers('cohort', n, false, VALUES, `bench-loopback-${n}`);
  const { ms, cpuMs, partial } = await cohortRound(cohort.peers, 0, 'none');
  if (partial) figures[`loopback_partial_${n}`] = true;
  await stopPeers();
  const echo = async (mode: 'tcp' | 'tls'): Promise<number> => {
    const { peers, addrs } = await startPeers(mode, n, false, VALUES, `bench-${mode}-${n}`);
    const echoMs = await tcpRound(peers, addrs);
    await stopPeers();
    return echoMs;
  };
  const tcpMs = await echo('tcp');
  const tlsMs = await echo('tls');
  figures[`loopback_ms_${n}`] = Math.round(ms);
  figures[`tcp_ms_${n}`] = Math.round(tcpMs);
  figures[`loopback_vs_tcp_${n}`] = Number((tcpMs / ms).toFixed(3));
  // encryption's own cost: the ceiling of loopback_vs_tcp for any encrypted transport on this machine
  figures[`tls_ms_${n}`] = Math.round(tlsMs);
  figures[`tls_vs_tcp_${n}`] = Number((tcpMs / tlsMs).toFixed(3));
  figures[`loopback_vs_tls_${n}`] = Number((tlsMs / ms).toFixed(3));
  // CPU-seconds a peer spends per GB of its vector averaged (the step's CPU, matchmaking included)
  const cpuPerGb = cpuMs / 1000 / ((VALUES * 4) / 1e9);
  figures[`cpu_s_per_gb_${n}`] = Number(cpuPerGb.toFixed(2));
  console.log(
    `  ${n} peers: Cohort ${(ms / 1000).toFixed(2)} s, raw TCP ${(tcpMs / 1000).toFixed(2)} s → ${(tcpMs / ms).toFixed(2)} of raw TCP speed; ${cpuPerGb.toFixed(2)} CPU-s per GB averaged per peer; ` +
      `TLS sockets alone ${(tlsMs / 1000).toFixed(2)} s (${(tcpMs / tlsMs).toFixed(2)} of raw TCP; Cohort ${(tlsMs / ms).toFixed(2)} of them)`,
  );
}
figures.efficiency_4 ??= null;
reportJson(figures);
process.exit(0);
