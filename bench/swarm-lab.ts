// The swarm lab (issue #22): a coordinator and N real `cohort run` peers in Linux network namespaces
// (root needed), the way volunteers reach each other:
// - a "public internet" bridge (10.78.0.0/16) with the coordinator and a third of the peers on it;
// - the other peers each behind its own home NAT router (a namespace with nftables masquerade that
//   lets no connection in): they run in --client-mode, reachable through relays only, as on Colab;
// - every peer's link shaped with tc tbf (upload / download) from a mix of 1 Gbit/s servers and
//   100/20, 50/10, 20/5 Mbit/s home links (this kernel has no netem: no delay emulation);
// - peers compute with --simulated-compute (the tiny model's gradients at a chosen rate, no
//   forward/backward), so many fit two cores while the averaging moves real bytes;
// - churn: every --churn-every seconds one peer leaves (SIGTERM and SIGKILL in turn) and a newcomer
//   takes its place (same namespace and link, a fresh data directory and identity).
// Everything it starts it stops within bounded time; the namespaces are removed on exit, also on
// failure or Ctrl-C (and a later run removes what a killed one left).
//
//   npm run bench -- swarm-lab [--peers 32] [--minutes 20] [--simulated-compute 8] [--epoch-seconds 15]
//                               [--churn-every <s>] [--preset tiny] [--keep-logs] [--log-level debug]
//
// Figures come from the peers' own log lines (what `cohort run` prints as it trains) and their
// processes' RSS (/proc). Last line: JSON with averaged_share (per epoch, the share of the peers
// that stepped whose gradients entered a group average; median over epochs), averaged_steps_share
// (the same over all peers' steps together), median_group_size,
// epoch_overhead (median epoch wall time ÷ the compute-only time: target batch ÷ the live peers'
// samples/s), bytes_per_peer_per_epoch (sent + received by a peer's gradient all-reduce, median),
// join_to_first_average_s (a newcomer's start to its first average, median; _max too),
// failed_rounds (count by reason), rss_growth_mb_per_h (max over peers with 10+ minutes of RSS
// samples from a minute after their first full-state save: the least-squares slope),
// retained_growth_mb_per_h (the same of RSS − the main V8 heap + what its last full collection kept:
// growth the heap's garbage swings do not drown); both from bench/_memory-probe.mjs inside each process,
// and peers_crashed, nat_peers / nat_peers_averaged, peers_never_averaged (lived ≥ 3 epochs).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { attachToBridge, createBridge, ensureNft, inNs, linkNamespaces, natRouter, removeNetns, shape } from './_netns.js';
import { median, reportJson } from './_report.js';
import { LOG_LEVELS } from '../src/config/settings.js';
import { DEFAULT_SAVE_STATE_MINUTES } from '../src/training/options.js';

const { values: opt } = parseArgs({
  options: {
    peers: { type: 'string', default: '32' },
    minutes: { type: 'string', default: '20' },
    'simulated-compute': { type: 'string', default: '8' },
    'epoch-seconds': { type: 'string', default: '15' },
    'churn-every': { type: 'string' },
    preset: { type: 'string', default: 'tiny' },
    'keep-logs': { type: 'boolean', default: false },
    'log-level': { type: 'string', default: 'info' },
  },
});
function numberOption(name: string, value: string | undefined, min: number): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number ≥ ${min}, got ${value}`);
  return n;
}
const PEERS = Math.round(numberOption('peers', opt.peers, 3));
if (PEERS > 200) throw new Error(`--peers ${PEERS}: at most 200 (one /24 per NAT'd peer)`);
const MINUTES = numberOption('minutes', opt.minutes, 1);
/** The peers' and the coordinator's log level: the figures come from their info lines, so info or more detail. */
const LOG_LEVELS_WITH_INFO = LOG_LEVELS.slice(0, LOG_LEVELS.indexOf('info') + 1);
const LOG_LEVEL = opt['log-level'];
if (!(LOG_LEVELS_WITH_INFO as readonly string[]).includes(LOG_LEVEL)) throw new Error(`--log-level must be one of ${LOG_LEVELS_WITH_INFO.join(', ')} (the figures come from the peers' info lines), got ${LOG_LEVEL}`);
const RATE = numberOption('simulated-compute', opt['simulated-compute'], 0.1);
const EPOCH_S = numberOption('epoch-seconds', opt['epoch-seconds'], 2);
// the issue's churn: a quarter of the swarm per 10 minutes
const CHURN_S = numberOption('churn-every', opt['churn-every'] ?? String(600 / Math.max(1, PEERS / 4)), 5);
const BATCH = 4;
const TARGET_BATCH = Math.max(BATCH * 2, Math.round(RATE * PEERS * EPOCH_S));
const PUBLIC = Math.max(1, Math.round(PEERS / 3));
/** Up/down Mbit/s: servers and a home uplink on the bridge; home links behind NAT. */
const PUBLIC_LINKS = [
  [1000, 1000],
  [100, 20],
] as const;
const HOME_LINKS = [
  [100, 20],
  [50, 10],
  [20, 5],
] as const;
const NAMES = { prefix: 'cohortl', bridge: 'cohortlbr0', vethPrefix: 'clv' };
const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'cohort.js');
/** Loaded into every process the lab starts: its memory as the main thread sees it, every 20 s (retained_growth_mb_per_h). */
const MEMORY_PROBE = path.join(path.dirname(fileURLToPath(import.meta.url)), '_memory-probe.mjs');
const ROOT = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-swarm-lab-'));
const LOGS = path.join(ROOT, 'logs');
fs.mkdirSync(LOGS);
/** A stopping peer publishes its last progress record and closes its store: seconds, on a loaded machine many. */
const STOP_GRACE_MS = 60_000;
/** The shortest span of RSS samples whose growth is reported (the issue's goal is over a 30-minute soak). */
const RSS_MIN_SPAN_MS = 10 * 60_000;
/** RSS growth is measured from this long after a peer began training: a minute after its first full-state save. */
const RSS_SETTLE_MS = (DEFAULT_SAVE_STATE_MINUTES + 1) * 60_000;
/** How long the first wave may take to start training. */
const STARTUP_LIMIT_MS = 300_000;

interface StepRecord {
  readonly at: number;
  readonly averagedWith: number;
  readonly bytes: number;
  readonly reason?: string;
}

interface Peer {
  readonly name: string;
  readonly slot: number;
  readonly nat: boolean;
  readonly link: readonly [number, number];
  readonly late: boolean;
  readonly startedAt: number;
  child?: ChildProcess;
  readonly steps: Map<number, StepRecord>;
  /** When it began training (its "training a … ALBERT" line). */
  trainingAt?: number;
  firstAverageAt?: number;
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  sentSignal?: NodeJS.Signals;
  readonly failures: string[];
}

const peers: Peer[] = [];
const children = new Set<ChildProcess>();
let coordinator: ChildProcess | undefined;
/** The peers' logs are kept when asked, or when something went wrong (a crash, an unclean stop, an error). */
let keepLogs = opt['keep-logs'];

function cleanup(): void {
  for (const child of children) child.kill('SIGKILL');
  removeNetns(NAMES);
  for (const entry of fs.existsSync(ROOT) ? fs.readdirSync(ROOT) : []) if (entry !== 'logs' || !keepLogs) fs.rmSync(path.join(ROOT, entry), { recursive: true, force: true });
  if (!keepLogs) fs.rmSync(ROOT, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    cleanup();
    process.exit(130);
  });
}
process.on('exit', cleanup);
// the whole lab is bounded: its minutes, start-up and the stop, with room; past that it gives up
const hardLimit = setTimeout(
  () => {
    console.log(`swarm lab: still running ${MINUTES + 10} minutes after it started; stopping everything`);
    cleanup();
    process.exit(1);
  },
  (MINUTES + 10) * 60_000,
);
hardLimit.unref();

function nsOf(slot: number): string {
  return slot < PUBLIC ? `${NAMES.prefix}-p${slot}` : `${NAMES.prefix}-n${slot}`;
}

/** The namespaces: coordinator and public peers on the bridge, the others each behind a NAT router. */
function buildNetwork(): void {
  ensureNft();
  createBridge(NAMES);
  onBridge(`${NAMES.prefix}-co`, 0, '10.78.0.1/16', [1000, 1000]);
  for (let slot = 0; slot < PEERS; slot++) {
    if (slot < PUBLIC) {
      onBridge(nsOf(slot), slot + 1, `10.78.1.${slot + 1}/16`, linkOf(slot));
      continue;
    }
    const router = `${NAMES.prefix}-r${slot}`;
    attachToBridge(NAMES, router, slot + 1, 'wan0', `10.78.2.${slot + 1}/16`);
    linkNamespaces(router, 'lan0', `192.168.${slot}.1/24`, nsOf(slot), 'eth0', `192.168.${slot}.2/24`);
    inNs(nsOf(slot), 'ip', 'route', 'add', 'default', 'via', `192.168.${slot}.1`);
    natRouter(router, 'wan0');
    const [down, up] = linkOf(slot);
    shape(nsOf(slot), 'eth0', up);
    shape(router, 'lan0', down);
  }
}

/** A namespace on the bridge with its link shaped: up on its own end, down on the bridge's. */
function onBridge(ns: string, index: number, cidr: string, [down, up]: readonly [number, number]): void {
  attachToBridge(NAMES, ns, index, 'eth0', cidr);
  shape(ns, 'eth0', up);
  shape(undefined, `${NAMES.vethPrefix}${index}`, down);
}

function linkOf(slot: number): readonly [number, number] {
  return slot < PUBLIC ? PUBLIC_LINKS[slot % PUBLIC_LINKS.length]! : HOME_LINKS[(slot - PUBLIC) % HOME_LINKS.length]!;
}

function addrOf(slot: number): string {
  return slot < PUBLIC ? `10.78.1.${slot + 1}` : `192.168.${slot}.2`;
}

/** Where the memory probe of the process logging to `logName` writes. */
function memoryFile(logName: string): string {
  return path.join(LOGS, logName.replace(/\.log$/, '.memory.jsonl'));
}

interface MemorySample {
  readonly at: number;
  readonly rssMb: number;
  readonly heapTotalMb: number;
  /** The V8 heap in use after the latest full collection (absent before the first). */
  readonly liveHeapMb?: number;
}

/** The probe's samples of the process that logged to `logName` (none when it wrote nothing). */
function memorySamples(logName: string): MemorySample[] {
  const file = memoryFile(logName);
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as MemorySample);
}

/** `cohort …` inside namespace `ns`; stderr goes to `logName` and each line to `onLine`. */
function cohort(ns: string, args: string[], logName: string, onLine: (line: string, at: number) => void): ChildProcess {
  const env = { ...process.env, COHORT_LAB_MEMORY_FILE: memoryFile(logName) };
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '--import', MEMORY_PROBE, CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const log = fs.createWriteStream(path.join(LOGS, logName));
  for (const stream of [child.stdout, child.stderr]) {
    readline.createInterface({ input: stream }).on('line', (line) => {
      log.write(line + '\n');
      onLine(line, Date.now());
    });
  }
  child.once('close', () => log.end());
  return child;
}

const RUN_WIDE = ['--preset', opt.preset, '--target-batch-size', String(TARGET_BATCH), '--lr', '0.001', '--warmup-steps', '1', '--total-steps', '100000'];

async function startCoordinator(dataDir: string): Promise<string> {
  let code: string | undefined;
  coordinator = cohort(`${NAMES.prefix}-co`, ['run', '--coordinator', '--run-id', 'swarm-lab', '--data-dir', dataDir, '--listen', '/ip4/10.78.0.1/tcp/0', '--reachability', 'public', '--checkpoint-every', '0', '--refresh', '2', '--log-level', LOG_LEVEL, ...RUN_WIDE], 'coordinator.log', (line) => {
    code ??= /cohort run --join (cohort:\S+)/.exec(line)?.[1];
  });
  const deadline = Date.now() + 120_000;
  while (code === undefined) {
    if (coordinator.exitCode !== null) throw new Error(`the coordinator exited (${coordinator.exitCode}) before printing its join code; see ${path.join(LOGS, 'coordinator.log')}`);
    if (Date.now() > deadline) throw new Error('the coordinator printed no join code within 120 s');
    await sleep(200);
  }
  return code;
}

let generation = 0;
function startPeer(slot: number, code: string, template: string, late: boolean): Peer {
  const name = `p${slot}-${generation++}`;
  const dir = path.join(ROOT, name);
  fs.cpSync(template, dir, { recursive: true });
  const nat = slot >= PUBLIC;
  const args = ['run', '--join', code, '--data-dir', dir, '--listen', `/ip4/${addrOf(slot)}/tcp/0`, ...(nat ? ['--client-mode'] : []), '--display-name', name, '--simulated-compute', String(RATE), '--batch-size', String(BATCH), '--threads', '1', '--refresh', '2', '--matchmaking-time', '10', '--averaging-timeout', '30', '--log-level', LOG_LEVEL];
  let pending: { averagedWith: number; bytes: number } | undefined;
  let failure: string | undefined;
  const peer: Peer = { name, slot, nat, link: linkOf(slot), late, startedAt: Date.now(), steps: new Map(), failures: [] };
  const child = (peer.child = cohort(nsOf(slot), args, `${name}.log`, (line, at) => {
    if (/training a \w+ ALBERT/.test(line)) peer.trainingAt ??= at;
    const averaged = /Averaged gradients with (\d+) peers \(([\d.]+) MB on the wire/.exec(line);
    if (averaged) {
      pending = { averagedWith: Number(averaged[1]), bytes: Number(averaged[2]) * 1e6 };
      if (pending.averagedWith > 1) peer.firstAverageAt ??= at;
      return;
    }
    const failed = /Averaging gradients failed at epoch \d+: (.*); taking a local step/.exec(line);
    if (failed) {
      failure = failed[1]!;
      return;
    }
    const step = /Step #(\d+), loss/.exec(line);
    if (step) {
      const epoch = Number(step[1]) - 1;
      peer.steps.set(epoch, { at, averagedWith: pending?.averagedWith ?? 1, bytes: pending?.bytes ?? 0, ...(failure !== undefined ? { reason: failure } : {}) });
      if (failure !== undefined) peer.failures.push(failure);
      pending = undefined;
      failure = undefined;
    }
  }));
  child.once('exit', (code, signal) => {
    peer.exit = { code, signal };
    // the data directory (a copy of the corpus and a store) is not needed once the peer is gone
    fs.rmSync(dir, { recursive: true, force: true });
  });
  peers.push(peer);
  return peer;
}

/**
 * A peer's memory growth (MB/h): the least-squares slope of `series` from RSS_SETTLE_MS after it began
 * training (loading the model, the first rounds' buffers and the first full-state save's, +50–65 MB
 * at once, docs/swarm.md, are not growth); undefined for spans under RSS_MIN_SPAN_MS (they measure the
 * first rounds' allocations, not a leak). A slope, not two endpoints: a sample lands wherever the heap
 * happens to be between two collections (±50 MB).
 */
function settledSlope(p: Peer, series: ReadonlyArray<{ readonly at: number; readonly mb: number }>): number | undefined {
  if (p.trainingAt === undefined) return undefined;
  const samples = series.filter((r) => r.at - p.trainingAt! >= RSS_SETTLE_MS);
  if (samples.length < 2 || samples.at(-1)!.at - samples[0]!.at < RSS_MIN_SPAN_MS) return undefined;
  return slope(samples.map((r) => [r.at / 3_600_000, r.mb] as const));
}

/** Least-squares slope of y over x. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const mx = points.reduce((sum, [x]) => sum + x, 0) / points.length;
  const my = points.reduce((sum, [, y]) => sum + y, 0) / points.length;
  const sxy = points.reduce((sum, [x, y]) => sum + (x - mx) * (y - my), 0);
  const sxx = points.reduce((sum, [x]) => sum + (x - mx) ** 2, 0);
  return sxy / sxx;
}

/** Sends `signal` and waits up to STOP_GRACE_MS for the exit, then SIGKILLs. */
async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

function live(): Peer[] {
  return peers.filter((p) => p.exit === undefined);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function main(): Promise<Record<string, number | string | boolean | null>> {
  console.log(`swarm lab: ${PEERS} peers (${PUBLIC} public, ${PEERS - PUBLIC} behind NAT) + a coordinator, ${MINUTES} min, simulated compute ${RATE} samples/s per peer, target batch ${TARGET_BATCH} (≈${EPOCH_S} s of compute per epoch), churn every ${CHURN_S} s; ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  buildNetwork();
  const template = path.join(ROOT, 'template');
  await new Promise<void>((resolve, reject) => {
    const prep = spawn(process.execPath, [CLI, 'data', 'prepare', '--data-dir', template, '--log-level', 'error'], { stdio: 'inherit', timeout: 180_000 });
    prep.once('exit', (c) => (c === 0 ? resolve() : reject(new Error(`cohort data prepare exited ${c}`))));
  });
  const code = await startCoordinator(path.join(ROOT, 'coordinator'));
  const launched = Date.now();
  // the first wave, staggered: 30 node processes compiling at once on 2 cores would stall for minutes
  for (let slot = 0; slot < PEERS; slot++) {
    startPeer(slot, code, template, false);
    await sleep(1500);
  }
  // the lab's minutes (and churn) count from when the first wave trains: on a loaded machine the
  // processes' start-up alone can take minutes, and measuring it is not the lab's job
  const startupLimit = Date.now() + STARTUP_LIMIT_MS;
  while (peers.some((p) => p.trainingAt === undefined && p.exit === undefined) && Date.now() < startupLimit) await sleep(500);
  const waiting = peers.filter((p) => p.trainingAt === undefined);
  if (waiting.length > 0) throw new Error(`${waiting.map((p) => p.name).join(', ')} did not begin training within ${STARTUP_LIMIT_MS / 1000} s (load ${os.loadavg()[0]!.toFixed(1)})`);
  const started = Date.now();
  const end = started + MINUTES * 60_000;
  console.log(`  ${PEERS} peers training ${((started - launched) / 1000).toFixed(0)} s after the first was started (load ${os.loadavg()[0]!.toFixed(1)})`);
  let nextChurn = Date.now() + CHURN_S * 1000;
  let leaves = 0;
  const crashed: string[] = [];
  while (Date.now() < end) {
    await sleep(1000);
    for (const p of peers) {
      if (p.exit && p.sentSignal === undefined && !crashed.includes(p.name)) {
        crashed.push(p.name);
        console.log(`  ${p.name} exited by itself (code ${p.exit.code}, signal ${p.exit.signal}); see ${path.join(LOGS, `${p.name}.log`)}`);
      }
    }
    if (Date.now() >= nextChurn && end - Date.now() > CHURN_S * 500) {
      nextChurn = Date.now() + CHURN_S * 1000;
      const candidates = live();
      const leaver = candidates[(leaves * 7919) % candidates.length]!;
      const signal: NodeJS.Signals = leaves++ % 2 === 0 ? 'SIGTERM' : 'SIGKILL';
      leaver.sentSignal = signal;
      console.log(`  churn at ${((Date.now() - started) / 1000).toFixed(0)} s: ${leaver.name} (${leaver.nat ? 'NAT' : 'public'}) leaves by ${signal}; a newcomer takes its place`);
      await stop(leaver.child!, signal);
      startPeer(leaver.slot, code, template, true);
    }
  }
  console.log(`  stopping ${live().length} peers and the coordinator`);
  const last = live();
  for (const p of last) p.sentSignal = 'SIGTERM';
  await Promise.all(last.map((p) => stop(p.child!, 'SIGTERM')));
  if (coordinator) await stop(coordinator, 'SIGTERM');
  // a peer still starting up has no signal handler yet: SIGTERM ends it at once, which is no fault
  const unclean = last.filter((p) => p.exit?.code !== 0 && p.trainingAt !== undefined);
  if (crashed.length > 0 || unclean.length > 0) keepLogs = true;
  for (const p of unclean) console.log(`  ${p.name} did not stop cleanly on SIGTERM (code ${p.exit?.code}, signal ${p.exit?.signal}); see ${path.join(LOGS, `${p.name}.log`)}`);
  return figures(crashed, unclean.length, started);
}

function figures(crashed: string[], unclean: number, started: number): Record<string, number | string | boolean | null> {
  const epochs = new Map<number, StepRecord[]>();
  for (const p of peers) for (const [e, s] of p.steps) epochs.set(e, [...(epochs.get(e) ?? []), s]);
  const ordered = [...epochs.keys()].sort((a, b) => a - b);
  const shares = ordered.map((e) => epochs.get(e)!.filter((s) => s.averagedWith > 1).length / epochs.get(e)!.length);
  const steps = [...epochs.values()].flat();
  const groups = steps.filter((s) => s.averagedWith > 1);
  // an epoch's time: between the swarm's steps of consecutive epochs (the first peer to step each: a
  // peer catching up steps late); compute-only: the target batch at the samples/s of the peers alive then
  const stepAt = (e: number): number => Math.min(...epochs.get(e)!.map((s) => s.at));
  const overheads: number[] = [];
  const epochTimes: number[] = [];
  for (const e of ordered) {
    if (!epochs.has(e - 1)) continue;
    const wall = (stepAt(e) - stepAt(e - 1)) / 1000;
    const at = stepAt(e);
    const alive = peers.filter((p) => p.startedAt <= at && (p.exit === undefined || (p.steps.size > 0 && Math.max(...[...p.steps.values()].map((s) => s.at)) >= at))).length;
    epochTimes.push(wall);
    overheads.push(wall / (TARGET_BATCH / (RATE * Math.max(1, alive))));
  }
  const joins = peers.filter((p) => p.late && p.firstAverageAt !== undefined).map((p) => (p.firstAverageAt! - p.startedAt) / 1000);
  const lateNever = peers.filter((p) => p.late && p.firstAverageAt === undefined).length;
  const failed: Record<string, number> = {};
  for (const p of peers) for (const f of p.failures) failed[reasonOf(f)] = (failed[reasonOf(f)] ?? 0) + 1;
  const memory = new Map(peers.map((p) => [p, memorySamples(`${p.name}.log`)]));
  const rss = (p: Peer): Array<{ at: number; mb: number }> => memory.get(p)!.map((m) => ({ at: m.at, mb: m.rssMb }));
  const growth = peers.map((p) => settledSlope(p, rss(p))).filter((g): g is number => g !== undefined);
  // the same without the main heap's uncollected garbage: RSS − V8's heap + what its last full collection kept
  const retained = peers
    .map((p) => settledSlope(p, memory.get(p)!.flatMap((m) => (m.liveHeapMb === undefined ? [] : [{ at: m.at, mb: m.rssMb - m.heapTotalMb + m.liveHeapMb }]))))
    .filter((g): g is number => g !== undefined);
  const epochTime = epochTimes.length > 0 ? median(epochTimes) : null;
  // peers that were there for at least 3 of the swarm's epochs: each of them should have averaged
  const longLived = peers.filter((p) => p.steps.size >= 3);
  const never = longLived.filter((p) => p.firstAverageAt === undefined);
  const nat = peers.filter((p) => p.nat && p.steps.size >= 3);
  const f = {
    peers: PEERS,
    minutes: MINUTES,
    cores: os.cpus().length,
    load_end: Number(os.loadavg()[0]!.toFixed(2)),
    epochs: ordered.length,
    averaged_share: shares.length > 0 ? Number(median(shares).toFixed(3)) : null,
    // the median over epochs hides a few peers failing for minutes: the share of all peers' steps
    averaged_steps_share: steps.length > 0 ? Number((steps.filter((s) => s.averagedWith > 1).length / steps.length).toFixed(3)) : null,
    median_group_size: groups.length > 0 ? median(groups.map((s) => s.averagedWith)) : null,
    epoch_s: epochTime === null ? null : Number(epochTime.toFixed(1)),
    epoch_overhead: overheads.length > 0 ? Number(median(overheads).toFixed(2)) : null,
    bytes_per_peer_per_epoch: groups.length > 0 ? Math.round(median(groups.map((s) => s.bytes))) : null,
    join_to_first_average_s: joins.length > 0 ? Number(median(joins).toFixed(1)) : null,
    join_to_first_average_max_s: joins.length > 0 ? Number(Math.max(...joins).toFixed(1)) : null,
    joiners: peers.filter((p) => p.late).length,
    joiners_never_averaged: lateNever,
    failed_rounds: Object.values(failed).reduce((s, n) => s + n, 0),
    failed_rounds_by_reason: JSON.stringify(failed),
    rss_growth_mb_per_h: growth.length > 0 ? Number(Math.max(...growth).toFixed(1)) : null,
    retained_growth_mb_per_h: retained.length > 0 ? Number(Math.max(...retained).toFixed(1)) : null,
    peers_crashed: crashed.length,
    peers_unclean_stop: unclean,
    peers_long_lived: longLived.length,
    peers_never_averaged: never.length,
    nat_peers: nat.length,
    nat_peers_averaged: nat.filter((p) => p.firstAverageAt !== undefined).length,
    wall_s: Math.round((Date.now() - started) / 1000),
  };
  console.log(`  epochs ${f.epochs}, each ${f.epoch_s} s (overhead ×${f.epoch_overhead} over compute alone); averaged_share ${f.averaged_share} (of all steps ${f.averaged_steps_share}), median group ${f.median_group_size}, ${f.bytes_per_peer_per_epoch} B per peer per epoch`);
  console.log(`  newcomers: ${f.joiners}, first average after ${f.join_to_first_average_s} s (max ${f.join_to_first_average_max_s} s), ${lateNever} never averaged`);
  console.log(`  failed rounds: ${f.failed_rounds} ${f.failed_rounds_by_reason}; RSS growth ${f.rss_growth_mb_per_h} MB/h, without the main heap's garbage ${f.retained_growth_mb_per_h} MB/h (max over peers)`);
  console.log(`  peers crashed ${f.peers_crashed}; of ${longLived.length} that stepped 3+ epochs ${never.length} never averaged; NAT'd: ${f.nat_peers_averaged} of ${f.nat_peers} averaged`);
  // each peer's RSS when it began training, once settled (RSS_SETTLE_MS) and at its last sample
  const rssAt = (p: Peer, from: number): string => (rss(p).find((r) => r.at >= from)?.mb.toFixed(0) ?? '-');
  console.log(`  RSS MB (training, settled, last): ${peers.filter((p) => p.trainingAt !== undefined && memory.get(p)!.length > 0).map((p) => `${p.name} ${rssAt(p, p.trainingAt!)}, ${rssAt(p, p.trainingAt! + RSS_SETTLE_MS)}, ${rss(p).at(-1)!.mb.toFixed(0)}`).join('; ')}`);
  if (never.length > 0) console.log(`  never averaged: ${never.map((p) => `${p.name}${p.nat ? ' (NAT)' : ''}`).join(', ')}`);
  if (keepLogs) console.log(`  logs in ${LOGS}`);
  return f;
}

/** A failure reason without its numbers and peer ids, so that like failures count together. */
function reasonOf(reason: string): string {
  return reason
    .replace(/12D3Koo\w+/g, '<peer>')
    .replace(/\d+(\.\d+)?/g, 'N')
    .slice(0, 80);
}

try {
  reportJson(await main());
} catch (err) {
  keepLogs = true;
  console.log(`swarm lab failed: ${(err as Error).message}; logs in ${LOGS}`);
  process.exitCode = 1;
}
clearTimeout(hardLimit);
process.exit();
