// Matchmaking at scale without training: `--peers` in-process swarm peers (a third of them servers,
// the rest in client mode, as the swarm lab's NAT'd peers), `--rounds` gradient rounds of a small
// vector, each peer starting its round at a random moment within `--jitter-ms` (peers end an epoch
// at different times) and expecting the whole swarm. Every peer in one process shares one event
// loop, so a loaded machine slows them all together: note the load.
//   npm run bench -- matchmaking [--peers 32] [--servers 11] [--rounds 5] [--jitter-ms 3000] [--matchmaking-time 10]
// Human-readable lines, then one JSON object as the last line: `grouped_share` (peer-rounds that
// averaged in a group ÷ all), `median_group_size`, `round_s_median` (a round's first start to its
// last peer's result), `round_cpu_s_median` (this process's CPU time in a round: steadier than wall
// time on a shared machine), `reads_per_round_median` (records get requests the swarm's servers
// answered in a round: what matchmaking polls cost), `failed_by_reason` (numbers and peer ids masked), `startup_s`, load, cores.
import os from 'node:os';
import { parseArgs } from 'node:util';
import { createAverager } from '../src/averaging/index.js';
import { startBenchSwarm } from './_dht-swarm.js';
import { median, reportJson } from './_report.js';

const { values: opt } = parseArgs({
  options: {
    peers: { type: 'string', default: '32' },
    servers: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    'jitter-ms': { type: 'string', default: '3000' },
    'matchmaking-time': { type: 'string', default: '10' },
  },
});

function count(name: string, value: string | undefined, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, not "${value}"`);
  return n;
}

const PEERS = count('peers', opt.peers, 2);
const SERVERS = opt.servers === undefined ? Math.ceil(PEERS / 3) : count('servers', opt.servers, 1);
if (SERVERS > PEERS) throw new Error(`--servers ${SERVERS} exceeds --peers ${PEERS}`);
const ROUNDS = count('rounds', opt.rounds, 1);
const JITTER_MS = count('jitter-ms', opt['jitter-ms'], 0);
const MATCHMAKING_S = count('matchmaking-time', opt['matchmaking-time'], 1);
/** Values each peer averages: small, so the rounds measure matchmaking rather than the all-reduce. */
const VALUES = 1000;

const load = (): string => os.loadavg().map((l) => l.toFixed(2)).join(' ');
console.log(`matchmaking: ${PEERS} peers in this process (${SERVERS} servers, ${PEERS - SERVERS} client-mode), ${ROUNDS} rounds, starts within ${JITTER_MS} ms, matchmaking time ${MATCHMAKING_S} s; ${os.cpus().length} cores, load ${load()}`);
const loadStart = os.loadavg()[0]!;
const started = performance.now();
// the first peer (the bootstrap) is a server; peers 1..SERVERS-1 too, the rest join in client mode
const swarm = await startBenchSwarm('bench-matchmaking', PEERS, (i) => (i < SERVERS ? {} : { clientMode: true, listen: [] }));
const startupS = (performance.now() - started) / 1000;
const averagers = swarm.nodes.map((node) => createAverager(node, { prefix: 'grad', matchmakingTimeMs: MATCHMAKING_S * 1000 }));
try {
  if (swarm.failed !== undefined) throw new Error(`the swarm did not start: ${swarm.joined} of ${PEERS} routable (${swarm.failed})`);
  console.log(`  swarm started in ${startupS.toFixed(1)} s`);
  // a fixed sequence of start offsets, so runs differ only by the machine
  let seed = 1;
  const jitter = (): number => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return (seed / 2 ** 32) * JITTER_MS;
  };
  const grouped: number[] = [];
  const sizes: number[] = [];
  const roundS: number[] = [];
  const roundCpuS: number[] = [];
  const roundGets: number[] = [];
  const getsServed = (): number => swarm.nodes.reduce((sum, n) => sum + n.stats().records.getRequestsServed, 0);
  const failed: Record<string, number> = {};
  for (let epoch = 1; epoch <= ROUNDS; epoch++) {
    const t = performance.now();
    const cpu = process.cpuUsage();
    const gets = getsServed();
    const results = await Promise.all(
      averagers.map(async (a, i) => {
        await new Promise((resolve) => setTimeout(resolve, jitter()));
        return a.step(new Float32Array(VALUES).fill(i), { epoch, weight: 1, expectedPeers: PEERS });
      }),
    );
    roundS.push((performance.now() - t) / 1000);
    const { user, system } = process.cpuUsage(cpu);
    roundCpuS.push((user + system) / 1e6);
    roundGets.push(getsServed() - gets);
    let ok = 0;
    for (const r of results) {
      if (r.ok) {
        ok++;
        sizes.push(r.group.members.length);
      } else {
        const reason = r.reason.replace(/\(seen:.*$/, '').replace(/12D3Koo\w+/g, 'P').replace(/[0-9]+(\.[0-9]+)?/g, 'N').trim();
        failed[reason] = (failed[reason] ?? 0) + 1;
      }
    }
    grouped.push(ok);
    console.log(`  round ${epoch}: ${ok} of ${PEERS} peers averaged in ${roundS.at(-1)!.toFixed(1)} s, ${roundCpuS.at(-1)!.toFixed(1)} CPU-s, ${roundGets.at(-1)} record reads served (groups of ${[...new Set(results.flatMap((r) => (r.ok ? [r.group.members.length] : [])))].join(', ') || '-'}); load ${load()}`);
  }
  const f = {
    peers: PEERS,
    servers: SERVERS,
    rounds: ROUNDS,
    cores: os.cpus().length,
    load_start: Number(loadStart.toFixed(2)),
    load_end: Number(os.loadavg()[0]!.toFixed(2)),
    startup_s: Number(startupS.toFixed(1)),
    grouped_share: Number((grouped.reduce((a, b) => a + b, 0) / (PEERS * ROUNDS)).toFixed(3)),
    median_group_size: sizes.length > 0 ? median(sizes) : null,
    round_s_median: Number(median(roundS).toFixed(1)),
    round_cpu_s_median: Number(median(roundCpuS).toFixed(1)),
    reads_per_round_median: median(roundGets),
    failed_by_reason: JSON.stringify(failed),
  };
  console.log(`  averaged: ${f.grouped_share} of peer-rounds, median group ${f.median_group_size}, round ${f.round_s_median} s, ${f.round_cpu_s_median} CPU-s (medians); failed ${f.failed_by_reason}`);
  reportJson(f);
} finally {
  await Promise.all(averagers.map((a) => a.stop()));
  await Promise.all(swarm.nodes.map((n) => n.stop()));
}
