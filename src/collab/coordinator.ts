/**
 * Coordinator mode (hivemind's training monitor): a peer that computes nothing, bootstraps others,
 * records every peer's signed progress per epoch in the store, credits contributions (capping and
 * flagging inflated claims), and checkpoints the swarm's full state (parameters and optimizer) every N
 * epochs by loading state from peers. Credits and throughput baselines live in the store, so a
 * restarted coordinator (same data dir) continues them and never credits a step twice; it serves its
 * newest checkpoint as state (while a trainer on its node runs, that trainer serves its own instead), so a run whose peers all left resumes there (full-state.ts), and the data
 * its run pins. The dashboard's coordinator switch and `cohort run --coordinator` both run one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createAverager, type Averager } from '../averaging/index.js';
import { keepTokenizer, keptTokenizer, TOKENIZER_FILE } from '../data/tokenizer-checkpoint.js';
import { saveModel } from '../engine/index.js';
import type { Logger } from '../log/logger.js';
import { serveShards, type ShardServing } from '../shards/index.js';
import { METRIC } from '../store/metric-series.js';
import { isDiskFull, type CreditRow, type Store, type ThroughputBaseline } from '../store/index.js';
import type { MetricPoint } from '../store/metrics.js';
import type { RecordEntry, RecordNamespace, SwarmNode } from '../swarm/index.js';
import { FollowableReports } from './backed-progress.js';
import { creditContribution, leaderboard } from './contribution.js';
import { globalProgress, PROGRESS_LIMITS } from './progress.js';
import { currentProgress, LEADERBOARD_NAMESPACE, leaderboardRecords, PROGRESS_KEY, progressRecords, type LeaderboardRecord, type ProgressRecord } from './records.js';
import { FullStateSaver, loadRunState, newerRunState, PEER_STATE_CHECKPOINT, SWARM_STATE_CHECKPOINT, type FullStateCheckpoint, type FullStateKind } from './full-state.js';
import { STATE_PREFIX } from './optimizer.js';
import type { RunParams } from './run-params.js';
import { decodeTrainingState } from './state.js';

export interface CoordinatorInit {
  readonly node: SwarmNode;
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  readonly targetBatchSize: number;
  /** Seconds between looks at the swarm. @default 2 */
  readonly refresh?: number;
  /** Checkpoint the model every N swarm epochs (0: never). @default 10 */
  readonly checkpointEvery?: number;
  /** Checkpoints kept. @default 3 */
  readonly keepCheckpoints?: number;
  /** The run's signed record, kept in each checkpoint (a restarted coordinator re-publishes it). */
  readonly run?: RunParams | undefined;
  /** A trainer on this node (the app's Start beside the switch) serves the run's state: the last checkpoint is served only once it stops (`trainerStopped`). @default false */
  readonly trainerBeside?: boolean;
}

/** Metric series the coordinator writes besides METRIC's. */
export const CREDITED_SERIES = 'credited_samples';
export const FLAGGED_SERIES = 'flagged_claim';
/** Epochs behind the swarm for which the all-reduce weights peers reported are kept. */
const WEIGHTS_KEPT_EPOCHS = 8;
/** Per-peer metric points are kept this long (the swarm's own series and the credits are kept for good), pruned this often. */
const PEER_METRICS_RETENTION_MS = 7 * 24 * 3_600_000;
const PRUNE_INTERVAL_MS = 3_600_000;

interface Pending {
  readonly step: NonNullable<ProgressRecord['lastStep']>;
  readonly at: number;
  readonly activeSeconds: number;
  readonly rate: number;
  readonly computeSeconds: number;
  /** The report that announced this step: the next step is measured from it (stored with the credit). */
  readonly next: ThroughputBaseline;
}

interface Seen {
  last?: ProgressRecord;
  /** Steps waiting for other peers' all-reduce weights before crediting. */
  pending: Map<number, Pending>;
  /**
   * The report its next step is measured from: the one that announced its previous step, else the
   * first report seen of it (kept in the store with each credit, so it survives a restart).
   */
  baseline?: ThroughputBaseline;
  /** Samples credited to it so far. */
  credited: number;
  /** When a report of it was last observed (coordinator's clock). */
  seenAt: number;
}

export class Coordinator {
  private readonly records: RecordNamespace<ProgressRecord>;
  private readonly board: RecordNamespace<LeaderboardRecord>;
  /** Credits changed since the leaderboard was last published. */
  private unpublished: boolean;
  private readonly state: Averager;
  private readonly followable: FollowableReports;
  private readonly peers = new Map<string, Seen>();
  /** Weights observed by each reporter in the all-reduce of each epoch: epoch → reporter → (peer → weight). */
  private readonly weights = new Map<number, Map<string, Record<string, number>>>();
  private swarmEpoch = -1;
  private lastPrune = 0;
  private lastCheckpointEpoch = 0;
  /** Its newest checkpoint of the run that verifies, loaded when constructed, until `start` serves it (read once: it may be large). */
  private lastCheckpoint: FullStateCheckpoint | undefined;
  /** Said once per run: checkpoints go without a tokenizer. */
  private warnedNoTokenizer = false;
  /** The last checkpoint failure warned about: the same one at the next looks (every --refresh seconds while the peers are gone) goes to debug. */
  private lastCheckpointFailure: string | undefined;
  private readonly saver: FullStateSaver;
  /** The last checkpoint served as state (after a restart, or once the trainer beside it stopped), until the swarm has a state as new (withdraw). */
  private served: Promise<{ epoch: number; withdraw: () => Promise<void> } | undefined> = Promise.resolve(undefined);
  /** The run's data served to its peers while running. */
  private shards: ShardServing | undefined;
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<void> | undefined;
  /** Why the last poll failed (undefined once one succeeds): a failure is logged when it begins or changes. */
  private pollFailure: string | undefined;
  private readonly o: Required<Pick<CoordinatorInit, 'refresh' | 'checkpointEvery' | 'keepCheckpoints'>>;
  private stopped = false;

  constructor(private readonly init: CoordinatorInit) {
    this.o = { refresh: 2, checkpointEvery: 10, keepCheckpoints: 3, ...init };
    this.records = progressRecords(init.node);
    this.board = leaderboardRecords(init.node);
    this.state = createAverager(init.node, { prefix: STATE_PREFIX, label: 'state', log: init.log });
    // the swarm's epoch is that of reports an advertised state backs: a bogus epoch (10⁶) would tag every
    // metric with it, stop the swarm loss from being recorded and retry a checkpoint of it every look.
    // With no state advertised at all there is no evidence against any report: all count, as before
    this.followable = new FollowableReports(async () => (await this.state.advertisedStateEpoch()) ?? Number.POSITIVE_INFINITY, init.log);
    // what a previous run on this store got to: credits (each peer's baseline and total come back when
    // it is next seen), the last swarm loss recorded, the last checkpoint
    const { contributions } = init.store;
    const run = init.node.runId;
    const totals = contributions.totals({ runId: run });
    this.unpublished = totals.length > 0;
    // a credited step E means the swarm loss of epoch E + 1 was recorded (it is recorded a poll before the credit)
    this.swarmEpoch = (contributions.lastCreditedEpoch(run) ?? -2) + 1;
    // counted from the newest checkpoint that verifies: a damaged newer one would put off the next
    // checkpoint (and leave the run with none usable) until the swarm passed its epoch
    this.lastCheckpoint = this.loadOwn(SWARM_STATE_CHECKPOINT);
    this.lastCheckpointEpoch = this.lastCheckpoint?.info.epoch ?? 0;
    this.saver = new FullStateSaver(init.store, init.log);
    // a restart after a kill mid-write: the epoch's folder is back before anyone reads the folders
    try {
      settleModelFolders(path.join(init.dataDir, MODEL_FOLDERS));
    } catch (err) {
      init.log.warn(`could not settle the model folders in ${path.join(init.dataDir, MODEL_FOLDERS)}: ${(err as Error).message}`);
    }
    if (totals.length > 0) init.log.info(`continuing the contribution credits of ${totals.length} peer(s) in run "${run}" from ${init.store.file}`);
  }

  start(): void {
    // one state per prefix and node: the trainer's, which resumed from the newest checkpoint or a newer one of its own
    const own = this.lastCheckpoint;
    this.lastCheckpoint = undefined;
    if (this.init.trainerBeside) this.init.log.info("not serving a checkpoint as state: the trainer on this node serves the run's state");
    else this.serveNewestCheckpoint(own);
    // a founding coordinator is the first holder of the data it pins; joining one, it serves what it holds of the run's
    if (this.init.run?.data) {
      this.shards = serveShards(this.init.node, this.init.store, this.init.log);
      this.shards.ready.catch((err: unknown) => this.init.log.warn(`could not serve the run's data to its peers: ${(err as Error).message}`));
    }
    this.timer = setInterval(() => {
      this.busy ??= this.poll()
        .then(() => {
          if (this.pollFailure !== undefined) this.init.log.info(`coordinator polls again (the last failure: ${this.pollFailure})`);
          this.pollFailure = undefined;
        })
        .catch((err: unknown) => {
          const message = isDiskFull(err) ? `the disk holding ${this.init.dataDir} is full (${(err as Error).message}): free space there; until then the swarm trains on, unrecorded (metrics, credits, checkpoints)` : (err as Error).message;
          // said once while it lasts: a full disk failed every poll, each --refresh seconds
          if (message !== this.pollFailure) this.init.log.warn(`coordinator poll failed: ${message}`);
          this.pollFailure = message;
        })
        .finally(() => (this.busy = undefined));
    }, this.o.refresh * 1000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.shards?.release();
    this.shards = undefined;
    clearInterval(this.timer);
    await this.busy;
    await this.served;
    await this.saver.close();
    await this.state.stop();
  }

  /**
   * The trainer beside it (which took the serving over: `yieldState`) stopped, as at the app's Pause:
   * the coordinator serves the newest checkpoint again (that trainer saved its state as it stopped), so
   * newcomers still load the run's state while nobody else serves it.
   */
  async trainerStopped(): Promise<void> {
    if (this.stopped || (await this.served) !== undefined) return;
    this.serveNewestCheckpoint();
    await this.served;
  }

  /**
   * A run whose peers all left resumes at its last checkpoint, not at epoch 0: the first joiners
   * load it from this coordinator (the optimizer loads a served state ahead of its own). The newest
   * of this data directory's, a trainer's beside it included; `own`: the coordinator's newest, when
   * already read.
   */
  private serveNewestCheckpoint(own = this.loadOwn(SWARM_STATE_CHECKPOINT)): void {
    if (this.stopped) return;
    this.served = this.serveCheckpoint(newerRunState(this.loadOwn(PEER_STATE_CHECKPOINT), own)).catch((err: unknown) => {
      this.init.log.warn(`could not serve the last checkpoint as state: ${(err as Error).message}`);
      return undefined;
    });
  }

  private loadOwn(kind: FullStateKind): FullStateCheckpoint | undefined {
    return loadRunState(this.init.store, kind, this.init.node.runId, this.init.run, this.init.log);
  }

  private async serveCheckpoint(last: FullStateCheckpoint | undefined): Promise<{ epoch: number; withdraw: () => Promise<void> } | undefined> {
    if (!last) return undefined;
    const { epoch } = last.state;
    const { withdraw } = await this.state.serveState({ epoch: () => epoch, snapshot: () => ({ epoch, data: last.bytes }) });
    this.init.log.info(`serving the checkpoint of epoch ${epoch} (${last.info.id} in ${this.init.store.checkpoints.file}) as the run's state until the swarm has one as new`);
    return { epoch, withdraw };
  }

  /** Stops serving the restart's checkpoint so that a trainer starting on this node serves the run's state (it resumes from that checkpoint, or a newer one of its own). */
  async yieldState(): Promise<void> {
    const pending = this.served;
    const served = await pending;
    if (served && this.served === pending) await this.withdraw(served, "the trainer on this node serves the run's state");
  }

  /** Stops serving the restart's checkpoint once another peer serves a state at least as new (two servers of different epochs would leave the newer unbacked: state-download.ts). */
  private async withdrawWhenOvertaken(): Promise<void> {
    const pending = this.served;
    const served = await pending;
    if (!served) return;
    const newest = await this.state.advertisedStateEpoch();
    if (newest === undefined || newest < served.epoch || this.served !== pending) return;
    await this.withdraw(served, `the swarm serves epoch ${newest}`);
  }

  private async withdraw(served: { epoch: number; withdraw: () => Promise<void> }, why: string): Promise<void> {
    this.served = Promise.resolve(undefined);
    await served.withdraw();
    this.init.log.info(`stopped serving the checkpoint of epoch ${served.epoch}: ${why}`);
  }

  /** Contributions credited in this run so far (before a restart too), ranked (display name, else peer id). */
  leaderboard(): ReturnType<typeof leaderboard> {
    return leaderboard(this.init.store.contributions.totals({ runId: this.init.node.runId }));
  }

  /** The credited steps whose claim was cut. */
  flagged(): CreditRow[] {
    return this.init.store.contributions.credits({ runId: this.init.node.runId, flaggedOnly: true });
  }

  /** Peers whose baselines and pending steps are held in memory: those seen in the last PROGRESS_LIMITS.maxAgeMs, or with a step still to credit. */
  get trackedPeers(): number {
    return this.peers.size;
  }

  /** One look at the swarm at `now` (ms): metrics, contributions, maybe a checkpoint. */
  async poll(now = Date.now()): Promise<void> {
    const entries = currentProgress(await this.records.get(PROGRESS_KEY), now);
    const points: MetricPoint[] = [];
    const reports = await this.followable.filter(
      entries.map((e) => ({ peerId: e.owner, ...e.value })),
      this.swarmEpoch,
    );
    const g = globalProgress(reports, now, { targetBatchSize: this.init.targetBatchSize });
    // tagged with the swarm epoch they were seen in, so exports can group them per epoch
    const epoch = g.epoch;
    points.push(
      { series: METRIC.epoch, value: g.epoch, epoch, ts: now },
      { series: METRIC.peersAlive, value: g.peers, epoch, ts: now },
      { series: METRIC.swarmSamplesPerSecond, value: g.samplesPerSecond, epoch, ts: now },
      { series: METRIC.samplesAccumulated, value: g.samples, epoch, ts: now },
      { series: METRIC.targetBatchSize, value: g.targetBatchSize, epoch, ts: now },
      ...(Number.isFinite(g.eta) ? [{ series: METRIC.etaSeconds, value: g.eta, epoch, ts: now }] : []),
    );
    for (const entry of entries) points.push(...this.observe(entry, now));
    points.push(...this.creditPending(now));
    // a peer whose reports stopped counting is forgotten (identities are free: the map would grow with
    // every one ever seen); its baseline and credits are in the store and come back with it
    for (const [peer, seen] of this.peers) if (seen.pending.size === 0 && now - seen.seenAt > PROGRESS_LIMITS.maxAgeMs) this.peers.delete(peer);
    // a step's reports arrive while the swarm is at most a few epochs further; older views are no longer needed
    for (const e of this.weights.keys()) if (e < g.epoch - WEIGHTS_KEPT_EPOCHS) this.weights.delete(e);
    const finished = reports.map((r) => r.lastStep).filter((s): s is NonNullable<typeof s> => s !== undefined && s.epoch + 1 === g.epoch);
    if (g.epoch > this.swarmEpoch && finished.length > 0) {
      // the swarm loss of the step just taken: sample-weighted over the peers that report it
      const total = finished.reduce((a, s) => a + s.samples, 0);
      const loss = finished.reduce((a, s) => a + s.loss * s.samples, 0) / Math.max(total, 1);
      points.push({ series: METRIC.loss, value: loss, epoch: g.epoch, ts: now });
      this.init.log.info(`Step #${g.epoch}, loss ${loss.toFixed(5)} (${g.peers} peers, ${g.samplesPerSecond.toFixed(1)} samples/s)`);
      this.swarmEpoch = g.epoch;
    }
    this.init.store.metrics.record(points);
    if (now - this.lastPrune >= PRUNE_INTERVAL_MS) {
      this.lastPrune = now;
      this.init.store.metrics.prunePeers(now - PEER_METRICS_RETENTION_MS);
    }
    if (this.unpublished) await this.publishLeaderboard(now);
    await this.withdrawWhenOvertaken();
    if (this.o.checkpointEvery > 0 && g.epoch >= this.lastCheckpointEpoch + this.o.checkpointEvery) await this.checkpoint(g.epoch);
  }

  private observe(entry: RecordEntry<ProgressRecord>, now: number): MetricPoint[] {
    const peer = entry.owner;
    const r = entry.value;
    let seen = this.peers.get(peer);
    if (!seen) {
      seen = { pending: new Map(), ...this.init.store.contributions.peerState(this.init.node.runId, peer), seenAt: now };
      this.peers.set(peer, seen);
    }
    seen.seenAt = now;
    const points: MetricPoint[] = [
      { series: METRIC.samplesPerSecond, value: r.samplesPerSecond, peer, ts: now },
      { series: METRIC.samples, value: r.totalSamples, peer, ts: now },
      { series: METRIC.computeSeconds, value: r.computeSeconds, peer, ts: now },
    ];
    const step = r.lastStep;
    const report: ThroughputBaseline = { time: r.time, totalSamples: r.totalSamples, epoch: r.epoch, samplesInEpoch: r.samples, computeSeconds: r.computeSeconds };
    if (step && !seen.pending.has(step.epoch) && !this.init.store.contributions.isCredited(this.init.node.runId, peer, step.epoch)) {
      points.push({ series: METRIC.loss, value: step.loss, epoch: step.epoch + 1, peer, ts: now });
      // measured throughput: samples it reported between its previous step (or first sight) and this one,
      // over that time (a step announced in the very first report seen has no baseline, so only the
      // all-reduce weights check it)
      const b = seen.baseline;
      const activeSeconds = b && r.time > b.time ? (r.time - b.time) / 1000 : 1;
      // the baseline report may already hold samples of the epoch being credited (it is the first report
      // seen after the previous step, not the step's instant): count them, or a slow peer whose only
      // micro-batch fell before that report would look like it claimed samples it never computed
      const carried = b && b.epoch === step.epoch ? b.samplesInEpoch : 0;
      const rate = b && r.time > b.time ? (Math.max(0, r.totalSamples - b.totalSamples) + carried) / activeSeconds : Infinity;
      // compute time: what its counter grew by since the baseline, at most the time that passed
      const computeSeconds = b && r.time > b.time ? Math.min(Math.max(0, r.computeSeconds - b.computeSeconds), activeSeconds) : 0;
      seen.pending.set(step.epoch, { step, at: now, activeSeconds, rate, computeSeconds, next: report });
      seen.baseline = report;
    } else if (!seen.baseline) {
      seen.baseline = report;
    }
    if (step?.weights) {
      let byReporter = this.weights.get(step.epoch);
      if (!byReporter) this.weights.set(step.epoch, (byReporter = new Map<string, Record<string, number>>()));
      byReporter.set(peer, step.weights);
    }
    seen.last = r;
    return points;
  }

  /** Credits a step once others' views of its all-reduce had a poll to arrive. */
  private creditPending(now: number): MetricPoint[] {
    const points: MetricPoint[] = [];
    for (const [peer, seen] of this.peers) {
      for (const [epoch, p] of seen.pending) {
        if (now - p.at < this.o.refresh * 1000) continue;
        // the weight it really sent, as the other members of its group saw it (not its own say-so)
        const observed = [...(this.weights.get(epoch) ?? new Map<string, Record<string, number>>())].filter(([reporter]) => reporter !== peer).map(([, w]) => w[peer]).filter((w): w is number => w !== undefined);
        const averagedWeight = observed.length > 0 ? Math.min(...observed) : undefined;
        const credit = creditContribution({ peerId: peer, displayName: seen.last?.displayName, claimedSamples: p.step.samples, measuredSamplesPerSecond: p.rate, activeSeconds: p.activeSeconds, ...(averagedWeight !== undefined ? { averagedWeight } : {}) });
        seen.pending.delete(epoch);
        const row: CreditRow = {
          runId: this.init.node.runId,
          peerId: peer,
          epoch,
          ...(credit.displayName ? { displayName: credit.displayName } : {}),
          claimed: credit.claimed,
          credited: credit.credited,
          computeSeconds: p.computeSeconds,
          ...(credit.flag !== undefined ? { flag: credit.flag } : {}),
          ts: now,
        };
        if (!this.init.store.contributions.credit(row, p.next)) continue;
        this.unpublished = true;
        seen.credited += credit.credited;
        points.push({ series: CREDITED_SERIES, value: seen.credited, epoch: epoch + 1, peer, ts: now });
        if (credit.flag) {
          points.push({ series: FLAGGED_SERIES, value: credit.claimed - credit.credited, epoch: epoch + 1, peer, ts: now });
          this.init.log.warn(`contribution of peer ${peer} at epoch ${epoch + 1} capped to ${credit.credited} samples and flagged: ${credit.flag}`);
        }
      }
    }
    return points;
  }

  /** Publishes the top contributors for `cohort status` and the dashboards of other peers. */
  private async publishLeaderboard(now: number): Promise<void> {
    const rows = this.leaderboard().slice(0, 20);
    try {
      this.unpublished = false;
      await this.board.store(LEADERBOARD_NAMESPACE, '', { time: now, rows, flagged: this.flagged().length }, now + 10 * 60_000);
    } catch (err) {
      this.unpublished = true;
      this.init.log.warn(`could not publish the leaderboard: ${(err as Error).message}`);
    }
  }

  /**
   * The swarm's state at `epoch` or later: that of the trainer on this node (the app's coordinator
   * switch beside Start) when it has one, with no download (a founder training alone has no other
   * donor); else a peer's, with the epoch it was served as. Undefined while the trainer's snapshot would take its pending step early.
   */
  private async swarmState(epoch: number): Promise<{ data: Uint8Array; epoch: number; donor: string } | undefined> {
    const local = this.state.localState();
    if (!local || local.epoch() < epoch) return this.state.loadStateFromPeers({ minEpoch: epoch });
    if (!(local.settled?.() ?? true)) return undefined;
    const { data, epoch: at } = await local.snapshot();
    return { data, epoch: at, donor: this.init.node.peerId.toString() };
  }

  /** Downloads the swarm's state and keeps it as a full-state checkpoint (store) and a model folder (`cohort model loss` reads it). */
  private async checkpoint(epoch: number): Promise<void> {
    try {
      const loaded = await this.swarmState(epoch);
      if (!loaded) return; // the trainer beside it has a step pending: the next look takes its state
      const s = decodeTrainingState(loaded.data, `peer ${loaded.donor}`);
      // the epoch inside a state is the donor's say-so: one far ahead of the swarm's would become the
      // last checkpoint's and put off every later checkpoint until the swarm got there
      if (s.epoch > epoch + 1) throw new Error(`peer ${loaded.donor} sent a state of epoch ${s.epoch}, but the swarm is at epoch ${epoch}`);
      // as the optimizer's load: the download checked the header's epoch against the advertisements, an
      // honest donor's bytes say the same; an older state would be recorded as the run's newest checkpoint
      // (a restart serves it) or rewrite an earlier epoch's folder
      if (s.epoch !== loaded.epoch || s.epoch < epoch) throw new Error(`peer ${loaded.donor} sent a state of epoch ${s.epoch} in a download of epoch ${loaded.epoch}, the swarm at epoch ${epoch}`);
      const keep = this.o.keepCheckpoints;
      if (!s.optimizer) throw new Error(`peer ${loaded.donor} sent a state without optimizer state`);
      // the tokenizer goes with the checkpoint, so `cohort model export` makes a directory HF loads whole
      const tokenizerSha256 = keepTokenizer(this.init.store, s.config.vocabSize);
      if (tokenizerSha256 === undefined && !this.warnedNoTokenizer) {
        this.warnedNoTokenizer = true;
        this.init.log.warn(`checkpoints carry no tokenizer: this data directory has no prepared data with the model's vocabulary of ${s.config.vocabSize} tokens (prepare the run's data here: cohort data prepare)`);
      }
      const meta = { runId: this.init.node.runId, ...(this.init.run ? { run: this.init.run } : {}), donor: loaded.donor, ...(tokenizerSha256 ? { tokenizerSha256 } : {}) };
      const saving = this.saver.saveBytes(SWARM_STATE_CHECKPOINT, s.epoch, loaded.data, meta, keep);
      if (!saving) return; // the previous checkpoint is still being written: the next look tries again
      await saving;
      const root = path.join(this.init.dataDir, MODEL_FOLDERS);
      writeModelFolder(root, s.epoch, keep, (dir) => {
        saveModel(dir, s.config, s.params);
        if (tokenizerSha256) fs.writeFileSync(path.join(dir, TOKENIZER_FILE), keptTokenizer(this.init.store, tokenizerSha256)!);
      });
      this.lastCheckpointEpoch = s.epoch;
      this.lastCheckpointFailure = undefined;
      this.init.log.info(`saved checkpoint of epoch ${s.epoch} from ${loaded.donor} in ${root}`);
    } catch (err) {
      const failure = `checkpoint at epoch ${epoch} failed: ${(err as Error).message}`;
      if (failure === this.lastCheckpointFailure) this.init.log.debug(`${failure}; retrying at the next look`);
      else this.init.log.warn(`${failure}; retrying at the next look (repeats of this failure are logged at debug level)`);
      this.lastCheckpointFailure = failure;
    }
  }
}

/** Where a coordinator keeps its model folders, in its data directory. */
const MODEL_FOLDERS = 'checkpoints';
/** A coordinator's model folder in `<data dir>/checkpoints` (readers take the highest as the newest). */
const MODEL_FOLDER = /^epoch-\d{6,}$/;
/** Prefix of a model folder being written: never a MODEL_FOLDER name, so neither readers nor pruning take it for a checkpoint. */
const WRITING_PREFIX = '.writing-';
/** Prefix of a model folder set aside while a new one of its epoch is renamed in (same reason). */
const REPLACED_PREFIX = '.replaced-';

/**
 * Settles what a killed model-folder write left in `root`: a folder set aside for a new one of its
 * epoch goes back when the kill came before the new one was in (the epoch is never lost), and is
 * deleted when it came after; a folder still being written is deleted.
 */
function settleModelFolders(root: string): void {
  if (!fs.existsSync(root)) return;
  for (const d of fs.readdirSync(root)) {
    if (d.startsWith(REPLACED_PREFIX)) {
      const name = path.join(root, d.slice(REPLACED_PREFIX.length));
      if (fs.existsSync(name)) fs.rmSync(path.join(root, d), { recursive: true, force: true });
      else fs.renameSync(path.join(root, d), name);
    } else if (d.startsWith(WRITING_PREFIX)) fs.rmSync(path.join(root, d), { recursive: true, force: true });
  }
}

/**
 * Writes the model folder of `epoch` in `root` whole or not at all, then keeps the newest `keep`: `write`
 * fills a hidden sibling that is renamed into place once its files are on disk, so a kill or a full disk
 * mid-write never leaves a truncated `epoch-*` folder that `cohort model loss` and users would read as
 * the newest. A folder of the epoch written before (a checkpoint taken again after a restart) is set
 * aside, not deleted, until the new one is in: at every moment one whole folder of the epoch is on
 * disk (a kill between the renames is settled by settleModelFolders).
 */
function writeModelFolder(root: string, epoch: number, keep: number, write: (dir: string) => void): void {
  fs.mkdirSync(root, { recursive: true });
  settleModelFolders(root);
  const name = `epoch-${String(epoch).padStart(6, '0')}`;
  const target = path.join(root, name);
  const writing = path.join(root, WRITING_PREFIX + name);
  const aside = path.join(root, REPLACED_PREFIX + name);
  let replaced = false;
  try {
    write(writing);
    // on disk before the rename makes them the newest checkpoint (a power cut would otherwise leave it empty)
    for (const f of fs.readdirSync(writing)) fsyncPath(path.join(writing, f));
    if (fs.existsSync(target)) {
      fs.renameSync(target, aside);
      replaced = true;
    }
    fs.renameSync(writing, target);
  } catch (err) {
    if (replaced && !fs.existsSync(target)) fs.renameSync(aside, target);
    fs.rmSync(writing, { recursive: true, force: true });
    throw new Error(`could not write the model folder ${target}: ${(err as Error).message}`, { cause: err });
  }
  // the renames themselves on disk (POSIX: a folder opens for fsync; Windows cannot open one, and NTFS journals the rename)
  if (process.platform !== 'win32') fsyncPath(root);
  if (replaced) fs.rmSync(aside, { recursive: true, force: true });
  const folders = fs.readdirSync(root).filter((d) => MODEL_FOLDER.test(d)).sort();
  for (const old of folders.slice(0, Math.max(0, folders.length - keep))) fs.rmSync(path.join(root, old), { recursive: true, force: true });
}

function fsyncPath(p: string): void {
  const fd = fs.openSync(p, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
