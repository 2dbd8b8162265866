// What grows with rounds: two in-process swarm peers (tiny ALBERT's parameters, synthetic gradients,
// no engine) train collaboratively for `--seconds`, averaging every epoch. After epoch `--first`, at
// half time and after the last epoch it takes the heap used after a full GC, the process's active handles
// (process.getActiveResourcesInfo) and open file descriptors (/proc/self/fd, Linux), and the
// libp2p connections and streams both nodes hold. Stores and metrics are not involved (the store's
// retention is tested in test/store/metrics.test.ts).
//   npm run bench -- long-run [--seconds 180] [--first 10]
// Human-readable lines, then one JSON object as the last line: `epochs`, `heap_mb_first`, `heap_mb_mid`,
// `heap_mb_last`, `heap_mb_per_100_epochs` (growth from half time to the end, past the warm-up: what
// a run of weeks adds), `handles_first`,
// `handles_last`, `fds_first`, `fds_last`, `streams_first`, `streams_last`, `connections_last`.
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { CollaborativeOptimizer } from '../src/collab/optimizer.js';
import { checkConfig, PRESETS } from '../src/engine/albert/config.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import { createOptimizer } from '../src/engine/optim/index.js';
import type { SwarmNode } from '../src/swarm/index.js';
import { startBenchSwarm } from './_dht-swarm.js';
import { reportJson } from './_report.js';

const { values: opt } = parseArgs({ options: { seconds: { type: 'string', default: '180' }, first: { type: 'string', default: '10' } } });
const SECONDS = Number(opt.seconds);
const FIRST = Number(opt.first);
if (!(SECONDS > 0) || !Number.isInteger(FIRST) || FIRST < 1) throw new Error(`--seconds must be positive and --first a positive integer, not ${opt.seconds} / ${opt.first}`);

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface Sample {
  readonly epoch: number;
  readonly heapMb: number;
  readonly handles: number;
  readonly fds: number;
  readonly connections: number;
  readonly streams: number;
}

function sample(epoch: number, nodes: readonly SwarmNode[]): Sample {
  gc();
  gc();
  const connections = nodes.flatMap((n) => n.libp2p.getConnections());
  return {
    epoch,
    heapMb: process.memoryUsage().heapUsed / 2 ** 20,
    handles: process.getActiveResourcesInfo().length,
    fds: fs.existsSync('/proc/self/fd') ? fs.readdirSync('/proc/self/fd').length : -1,
    connections: connections.length,
    streams: connections.reduce((a, c) => a + c.streams.length, 0),
  };
}

const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
const log = pino({ level: 'silent' });
const { nodes, failed } = await startBenchSwarm('bench-long-run', 2);
if (failed !== undefined) throw new Error(failed);
const peers = nodes.map((node, i) => {
  const params = initAlbertParams(config, 1);
  const collab = new CollaborativeOptimizer(node, config, params, createOptimizer(params, { kind: 'lamb' }), { targetBatchSize: 32, matchmakingTime: 2, averagingTimeout: 10, maxRefresh: 1, peakLr: 0.01, warmupSteps: 1, totalSteps: 100_000 }, log);
  const grads = params.zerosLike();
  for (let k = 0; k < grads.size; k++) grads.data[k] = Math.sin(k * (i + 1)) * 0.01;
  return { collab, grads };
});
await Promise.all(peers.map((p) => p.collab.start()));

const started = performance.now();
const halfTime = started + SECONDS * 500;
const deadline = started + SECONDS * 1000;
const samples: Sample[] = [];
let mid: Sample | undefined;
let averaged = 0;
// each peer feeds 4-sample micro-batches (1 s of compute by the clock it tells) until the deadline
await Promise.all(
  peers.map(async (p, i) => {
    while (performance.now() < deadline) {
      const outcome = await p.collab.step(p.grads, 4, 1, 1);
      if (outcome.type === 'stepped') {
        if (outcome.averagedWith === 2) averaged++;
        if (i === 0 && outcome.epoch === FIRST) samples.push(sample(outcome.epoch, nodes));
        if (i === 0 && mid === undefined && performance.now() >= halfTime) mid = sample(outcome.epoch, nodes);
      }
      await new Promise((r) => setTimeout(r, 40));
    }
  }),
);
const epoch = Math.min(...peers.map((p) => p.collab.epoch));
const last = sample(epoch, nodes);
await Promise.all(peers.map((p) => p.collab.stop()));
await Promise.all(nodes.map((n) => n.stop()));

const first = samples[0];
if (first === undefined || mid === undefined || mid.epoch <= first.epoch) throw new Error(`the peers reached epoch ${epoch} (--first ${FIRST}) in ${SECONDS} s: run longer`);
for (const s of [first, mid, last]) console.log(`epoch ${s.epoch}: heap ${s.heapMb.toFixed(1)} MiB, ${s.handles} active handles, ${s.fds} fds, ${s.connections} connections, ${s.streams} streams`);
console.log(`${averaged} peer-steps averaged with both peers`);
reportJson({
  epochs: epoch,
  averaged_peer_steps: averaged,
  heap_mb_first: Number(first.heapMb.toFixed(2)),
  heap_mb_mid: Number(mid.heapMb.toFixed(2)),
  heap_mb_last: Number(last.heapMb.toFixed(2)),
  heap_mb_per_100_epochs: last.epoch > mid.epoch ? Number((((last.heapMb - mid.heapMb) / (last.epoch - mid.epoch)) * 100).toFixed(2)) : null,
  handles_first: first.handles,
  handles_last: last.handles,
  fds_first: first.fds,
  fds_last: last.fds,
  streams_first: first.streams,
  streams_last: last.streams,
  connections_last: last.connections,
});
