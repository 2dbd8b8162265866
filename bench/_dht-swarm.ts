// Many swarm peers in one process (no training): the records part of bench/dht.ts, and the swarm bench/matchmaking.ts groups.
import { z } from 'zod';
import { createSwarmNode, type SwarmInit, type SwarmNode } from '../src/swarm/index.js';
import { median } from './_report.js';

const schema = z.strictObject({ samples: z.number().int(), epoch: z.number().int() });
const JOIN_BATCH = 5;

export interface DhtFigures {
  readonly peers: number;
  /** peers routable when the swarm finished starting, or when it stopped trying (`failed`) */
  readonly joined: number;
  /** why the swarm did not finish starting (no store/get was measured) */
  readonly failed?: string;
  readonly store: number[];
  readonly get: number[];
  /** share of gets that returned the value stored just before (by another peer) */
  readonly success: number;
  /** the same writer storing the key again, then the same reader reading it again (a peer's periodic progress report and read) */
  readonly storeRepeat: number[];
  readonly getRepeat: number[];
  /** share of repeated gets that returned the repeated store's value */
  readonly successRepeat: number;
  /** connections opened per first store or get (a lookup's dials), over the swarm */
  readonly dialsPerOp: number;
  readonly startupS: number;
  /** CPU seconds this process spent starting the swarm: steadier than startupS on a shared machine */
  readonly startupCpuS: number;
}

export function p90(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.9))]!;
}

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A swarm of in-process peers (startBenchSwarm): its nodes, and why it stopped growing if it did. */
export interface BenchSwarm {
  readonly nodes: SwarmNode[];
  /** Peers routable when it finished starting, or when it stopped trying (`failed`). */
  readonly joined: number;
  readonly failed?: string;
}

/**
 * `peers` swarm nodes of run `runId` in this process on 127.0.0.1 (reachability `auto`, as volunteers
 * run, unless `initOf(i)` says otherwise for peer i ≥ 1); the first is every other's bootstrap peer.
 * The caller stops the nodes, also when `failed` is set.
 */
export async function startBenchSwarm(runId: string, peers: number, initOf: (i: number) => Partial<SwarmInit> = () => ({})): Promise<BenchSwarm> {
  // every peer is on 127.0.0.1: lift the per-IP inbound connection limit meant for the internet
  const init = { runId, listen: ['/ip4/127.0.0.1/tcp/0'], initialQuerySelfIntervalMs: 50, inboundConnectionsPerHostPerSecond: 1000 };
  const first = await createSwarmNode(init);
  const nodes: SwarmNode[] = [first];
  // Peers join in small batches, each routable before the next starts: hundreds of simultaneous
  // handshakes on 2 cores time out identify, which a real swarm (peers arriving over time) never sees.
  try {
    for (let i = 1; i < peers; i += JOIN_BATCH) {
      const batch = await Promise.all(Array.from({ length: Math.min(JOIN_BATCH, peers - i) }, (_, k) => createSwarmNode({ ...init, initialPeers: first.multiaddrs(), ...initOf(i + k) })));
      nodes.push(...batch);
      await Promise.all(batch.map((n) => n.ready));
      try {
        await waitFor(`peers ${i}–${i + batch.length - 1} to be routable`, () => batch.every((n) => n.stats().routingTableSize >= 1), 60_000);
      } catch (err) {
        // how far it got is the figure: a swarm that stops growing at 25 peers says more than an exception
        return { nodes, joined: i, failed: (err as Error).message };
      }
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw err;
  }
  return { nodes, joined: peers };
}

/**
 * `peers` swarm nodes in this process (startBenchSwarm); `ops` times, one peer stores a record and
 * another reads it back, then the same two store and read that key again (what a training peer does
 * with its progress key every refresh period).
 */
export async function measureDht(peers: number, ops: number): Promise<DhtFigures> {
  const started = performance.now();
  const cpuAtStart = process.cpuUsage();
  const cpuS = (): number => {
    const { user, system } = process.cpuUsage(cpuAtStart);
    return (user + system) / 1e6;
  };
  const swarm = await startBenchSwarm(`bench-${peers}`, peers);
  const { nodes } = swarm;
  try {
    if (swarm.failed !== undefined) return { peers, joined: swarm.joined, failed: swarm.failed, store: [], get: [], success: 0, storeRepeat: [], getRepeat: [], successRepeat: 0, dialsPerOp: 0, startupS: (performance.now() - started) / 1000, startupCpuS: cpuS() };
    const startupS = (performance.now() - started) / 1000;
    const startupCpuS = cpuS();
    const ns = nodes.map((n) => n.registerNamespace('progress', schema));
    const store: number[] = [];
    const get: number[] = [];
    const storeRepeat: number[] = [];
    const getRepeat: number[] = [];
    let found = 0;
    let foundRepeat = 0;
    // every connection is counted at both of its ends, all of them in this process
    const connections = (): number => nodes.reduce((sum, n) => sum + n.stats().connections.length, 0) / 2;
    let dialed = 0;
    for (let i = 0; i < ops; i++) {
      const writer = ns[(i * 7) % peers]!;
      const reader = ns[(i * 13 + 5) % peers]!;
      const before = connections();
      let t = performance.now();
      await writer.store(`progress/${i}`, '', { samples: i, epoch: 1 }, Date.now() + 60_000);
      store.push(performance.now() - t);
      t = performance.now();
      const got = await reader.get(`progress/${i}`);
      get.push(performance.now() - t);
      dialed += connections() - before;
      if ([...got.values()][0]?.value.samples === i) found++;
      t = performance.now();
      await writer.store(`progress/${i}`, '', { samples: i, epoch: 2 }, Date.now() + 60_000);
      storeRepeat.push(performance.now() - t);
      t = performance.now();
      const again = await reader.get(`progress/${i}`);
      getRepeat.push(performance.now() - t);
      if ([...again.values()][0]?.value.epoch === 2) foundRepeat++;
    }
    return { peers, joined: peers, store, get, success: found / ops, storeRepeat, getRepeat, successRepeat: foundRepeat / ops, dialsPerOp: dialed / (2 * ops), startupS, startupCpuS };
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
}

/** One human line for a measurement. */
export function describeDht(f: DhtFigures): string {
  if (f.failed !== undefined) return `${f.peers} peers: did not start, ${f.joined} routable after ${f.startupS.toFixed(1)} s, ${f.startupCpuS.toFixed(1)} CPU-s (${f.failed})`;
  return `${f.peers} peers: store median ${median(f.store).toFixed(1)} ms (p90 ${p90(f.store).toFixed(1)}), get median ${median(f.get).toFixed(1)} ms (p90 ${p90(f.get).toFixed(1)}), success ${f.success.toFixed(3)} over ${f.get.length} keys; again: store median ${median(f.storeRepeat).toFixed(1)} ms (p90 ${p90(f.storeRepeat).toFixed(1)}), get median ${median(f.getRepeat).toFixed(1)} ms (p90 ${p90(f.getRepeat).toFixed(1)}), success ${f.successRepeat.toFixed(3)}; ${f.dialsPerOp.toFixed(1)} connections opened per first store or get [startup ${f.startupS.toFixed(1)} s, ${f.startupCpuS.toFixed(1)} CPU-s]`;
}
