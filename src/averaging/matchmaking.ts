import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '../log/logger.js';
import type { RecordEntry, SwarmNode } from '../swarm/index.js';
import { OTHER_RELEASE_NOTICE, OTHER_SCHEMA_NOTICE } from '../util/notices.js';
import type { Compression } from './compression.js';
import { FIRST_MESSAGE_TIMEOUT_MS, MATCHMAKING_PROTOCOL, MAX_CONTROL_BYTES } from './constants.js';
import { MatchmakingError, ProtocolError, type JoinRefusal } from './errors.js';
import { deadline, FramedStream } from './framing.js';
import { groupInfo, type GroupInfo } from './group.js';
import type { AveragingHub } from './hub.js';
import { joinResponseSchema, readySchema, type DataPins, type Declaration, type GroupWire, type JoinRequest, type JoinResponse, type Member, type Ready } from './messages.js';

/**
 * This peer's weight (samples behind its vector): known when matchmaking starts (a plain step), or
 * set later by the caller of a pre-scheduled step (hivemind's schedule_step), once its last
 * micro-batch is done. The group description is only sent when every member's weight is known.
 */
export class MemberWeight {
  private readonly listeners = new Set<() => void>();

  /** `known`: the weight of a plain step, known from the start. */
  constructor(private known?: number) {}

  get value(): number | undefined {
    return this.known;
  }

  set(weight: number): void {
    if (this.known !== undefined) throw new Error(`weight already set to ${this.known}`);
    this.known = weight;
    for (const l of this.listeners) l();
    this.listeners.clear();
  }

  /** Calls `listener` once the weight is known (at once if it is). */
  onSet(listener: () => void): void {
    if (this.known !== undefined) listener();
    else this.listeners.add(listener);
  }
}

export interface MatchmakingParams {
  /** Record key of this round, `averaging/<prefix>:<epoch>`. */
  readonly key: string;
  readonly schema: string;
  /** What this peer trains on: peers declaring other data are never grouped with it (null: none pinned). */
  readonly data: DataPins | null;
  readonly self: Omit<Member, 'weight'>;
  readonly weight: MemberWeight;
  /** Most peers in a group: joins beyond it are refused. */
  readonly targetGroupSize: number;
  /**
   * Peers this round expects (at most targetGroupSize): a ready leader closes its group once it has
   * them. Read again as the group grows and when this peer becomes ready, because a pre-scheduled
   * round's caller learns more about the swarm while it computes.
   */
  readonly expectedPeers: () => number;
  readonly minGroupSize: number;
  readonly matchmakingTimeMs: number;
  readonly expirationMs: number;
  /** How long a closed group waits for pre-scheduled members' weights before it goes on without them. */
  readonly readyTimeoutMs: number;
  readonly pollIntervalMs: number;
  /** Settings a leader puts into the group description. */
  readonly compression: Compression;
  readonly size: number;
  readonly chunkValues: number;
  /**
   * The most weight (samples) a peer may carry in this round, from what the swarm has seen it do
   * (the caller derives it from progress records). A leader lowers larger weights to it in the group
   * description (logged). @default no bound
   */
  readonly weightBound?: (peer: string) => number;
  /**
   * The caller's view shows the swarm already stepped past this round's epoch: only peers as late as
   * this one are left to group with. Once LATE_READS reads after its own declaration show none it
   * could group with, it gives up instead of waiting out the matchmaking time (see leftBehind).
   */
  readonly late?: boolean;
  readonly signal?: AbortSignal;
}

/** Stages of one peer's matchmaking (hivemind's leader/follower states). */
type Role =
  /** a client-mode peer between attempts: it cannot lead, so it refuses joins */
  | { readonly kind: 'looking' }
  /** accepting followers until the group is full or time is up */
  | { readonly kind: 'leading' }
  /** asking `leader` to join, or accepted and waiting for the group description; `unverified` until it answers as a leader */
  | { readonly kind: 'following'; readonly leader: string; readonly unverified: boolean }
  /** the group is closed (or matchmaking ended): late joiners are refused */
  | { readonly kind: 'done' };

interface Follower {
  readonly member: Omit<Member, 'weight'>;
  /** Undefined until a pre-scheduled follower sends its Ready. */
  weight: number | undefined;
  /** Its Ready never came (stream failed or timed out). */
  failed: boolean;
  readonly framed: FramedStream;
  readonly release: () => void;
}

const DIAL_TIMEOUT_MS = 5000;

/** Refusals after which a leader is not asked again in this round. */
const FINAL_REFUSALS: ReadonlySet<JoinRefusal> = new Set(['GROUP_IS_FULL', 'ALREADY_RUNNING', 'BAD_SCHEMA_HASH', 'DATA_MISMATCH', 'EPOCH_MISMATCH', 'NOT_LOOKING_FOR_GROUP', 'NOT_ENOUGH_PEERS', 'NOT_READY', 'BAD_REQUEST']);

/**
 * Refusals of a peer whose group under the key filled or closed (or that averages in one already): a
 * peer that followed it named it honestly, the group filling between that hint and this peer's join.
 */
const CLOSED_GROUP: ReadonlySet<JoinRefusal> = new Set(['GROUP_IS_FULL', 'ALREADY_RUNNING']);

/**
 * Times a leader's dial or stream may fail (not stay silent until the deadline: see follow) before it
 * is given up for the round. On a loaded machine a live leader misses a 5 s dial now and then, most of all when
 * a whole swarm dials it in the same second; given up at once, it lost every such follower for the
 * round (bench allreduce: 8 peers, no group in 3 runs of 3).
 */
const UNREACHABLE_TRIES = 3;

/**
 * Reads of the key after its own declaration was stored that a late peer makes before it gives up
 * finding nobody to group with: peers as late as it, declaring in the same second, find each other.
 */
const LATE_READS = 2;

/** Polls after which a leader alone asks a declared peer that never joined it (see probeSilent). */
const SILENT_POLLS = 4;

/** How long a follower may spend re-reading declarations to check a group description's members. */
const VERIFY_READ_TIMEOUT_MS = 3000;

/**
 * Leader order under `key`: the SHA-256 of (key, peer), lowest first. Unlike hivemind's earliest
 * declared expiration, a peer cannot move itself up by what it declares, and the order changes
 * with every key (epoch), so no identity leads every round.
 */
export function leaderRank(key: string, peer: string): string {
  return createHash('sha256').update(`${key}\n${peer}`).digest('hex');
}

function sameData(a: DataPins | null, b: DataPins | null): boolean {
  return a === null || b === null ? a === b : a.datasetId === b.datasetId && a.tokenizerSha256 === b.tokenizerSha256;
}

/** Both hashes of a peer's data, for messages that tell a volunteer which side holds what. */
function describeDataPins(d: DataPins | null): string {
  return d === null ? 'no pinned data' : `tokenizer sha256 ${d.tokenizerSha256}, dataset ${d.datasetId}`;
}

/**
 * Finds a group under `params.key` as hivemind does, with a leader nobody can choose: declare, let
 * the declared server peer of lowest leaderRank lead, join it; the leader closes the group when it
 * is full or its matchmaking time is over, and every follower checks the whole group description
 * before it averages. Throws MatchmakingError with what was seen when no group of at least
 * `minGroupSize` formed.
 */
export class Matchmaker {
  private role: Role = { kind: 'looking' };
  private readonly followers: Follower[] = [];
  private readonly seen = new Set<string>();
  /** The latest declaration read from each peer under the key (schema matching ours). */
  private readonly declared = new Map<string, Declaration>();
  /** When each peer's declaration was first read (ms). */
  private readonly firstSeen = new Map<string, number>();
  /** Peers probed by probeSilent (once each). */
  private readonly probed = new Set<string>();
  private readonly refusedBy = new Map<string, string>();
  /** Peers that refused this one with a CLOSED_GROUP code: a NOT_A_LEADER naming one of them was honest. */
  private readonly closed = new Set<string>();
  /** Peers declared under the key with other data than ours: never grouped with (and told why once). */
  private readonly mismatched = new Map<string, DataPins | null>();
  /** Peers declared under the key with another tensor schema (another model, settings or Cohort release): never grouped with. */
  private readonly otherSchema = new Map<string, string>();
  /** Peers declared under the key that do not speak this release's matchmaking protocol. */
  private readonly otherRelease = new Set<string>();
  /** leaders that said NOT_A_LEADER or failed to answer: skipped until this time (ms) */
  private readonly backoff = new Map<string, number>();
  /** Peers that sent this one on with NOT_A_LEADER since it last chose a leader itself, in order: a hint back among them is a loop. */
  private redirects: string[] = [];
  /** Leaders that failed to answer (not yet UNREACHABLE_TRIES times): how often, and the last error. */
  private readonly unreachable = new Map<string, { tries: number; why: string }>();
  private changed: (() => void) | undefined;
  private readonly self: string;
  private expiration = 0;
  private started = 0;
  /** When this peer's weight became known (at the start for a plain step). */
  private readyAt: number | undefined;
  /** Whether this peer's declaration was stored (or failed to be), and the reads of the key begun after that. */
  private declarationSettled = false;
  private readsAfterDeclaring = 0;

  constructor(
    private readonly node: SwarmNode,
    private readonly hub: AveragingHub,
    private readonly p: MatchmakingParams,
    private readonly log: Logger,
  ) {
    this.self = p.self.peer;
  }

  async run(): Promise<GroupInfo> {
    if (this.hub.matchmakers.has(this.p.key)) throw new MatchmakingError('CANCELLED', `already looking for a group under ${this.p.key} on this node`);
    this.hub.matchmakers.set(this.p.key, (framed, peer, request) => this.onJoin(framed, peer, request));
    this.started = Date.now();
    this.expiration = this.started + this.p.expirationMs;
    // readiness moves the deadline (end()) and wakes a leader waiting for weights (awaitWeights)
    this.p.weight.onSet(() => {
      this.readyAt = Date.now();
      this.notify();
    });
    // a server peer accepts followers from the start and hands them over if it finds an earlier leader
    this.role = this.idle();
    // declaring and reading run side by side: DHT round trips can take seconds in a busy swarm
    const declared = this.declare();
    try {
      let next = await this.chooseLeader(this.end());
      /** The peer that named `next` with NOT_A_LEADER, when it did. */
      let hinter: string | undefined;
      while (Date.now() < this.end()) {
        this.p.signal?.throwIfAborted();
        if (next === this.self) {
          const outcome = await this.lead();
          if (typeof outcome !== 'string') {
            if (outcome === undefined) break;
            this.hub.markRunning(this.p.key, this.p.expirationMs);
            return outcome;
          }
          next = outcome;
          continue;
        }
        if (next !== undefined) {
          const outcome = await this.follow(next, hinter);
          if (typeof outcome === 'object') {
            this.hub.markRunning(this.p.key, this.p.expirationMs);
            return outcome;
          }
          // a refusing peer may name the leader it follows: ask that one next without another DHT read
          if (outcome !== undefined) {
            hinter = next;
            next = outcome;
            continue;
          }
          hinter = undefined;
        } else {
          if (this.leftBehind()) break;
          await this.sleep(this.p.pollIntervalMs);
        }
        if (Date.now() < this.end()) next = await this.chooseLeader(this.end());
      }
      throw this.noGroup();
    } finally {
      this.role = { kind: 'done' };
      this.hub.matchmakers.delete(this.p.key);
      this.disband('CANCELLED', `${this.self} stopped looking for a group under ${this.p.key}`);
      // the declaration may still be travelling (a lonely DHT query can take seconds): let it finish on its own
      void declared;
    }
  }

  /**
   * When this peer stops looking for a group (as a leader: closes it): one matchmaking time after it
   * is ready, as for a plain step. A pre-scheduled peer keeps looking, and its group stays open to
   * latecomers, until it is ready; at most while its declaration lives.
   */
  private end(): number {
    return this.readyAt === undefined ? this.started + this.p.expirationMs : this.readyAt + this.p.matchmakingTimeMs;
  }

  /** The role between attempts: a server peer leads (accepts joins), a client-mode peer only looks. */
  private idle(): Role {
    return this.p.self.clientMode ? { kind: 'looking' } : { kind: 'leading' };
  }

  private async declare(): Promise<void> {
    const { bandwidth, clientMode } = this.p.self;
    const weight = this.p.weight.value;
    try {
      const stored = await this.hub.groups.store(this.p.key, '', { ...(weight === undefined ? {} : { weight }), bandwidth, clientMode, schema: this.p.schema, data: this.p.data }, this.expiration);
      if (stored.replicas === 0) this.log.warn({ key: this.p.key, refused: stored.refused }, 'group declaration reached no DHT peer; others may not find this peer');
    } catch (err) {
      this.log.warn({ key: this.p.key, err: (err as Error).message }, 'could not declare this peer for a group');
    } finally {
      this.declarationSettled = true;
    }
  }

  /** Reads the declarations under the key into `declared` and `seen`; a read that outlasts `end` counts as finding nobody. */
  private async readDeclarations(end: number): Promise<ReadonlyArray<RecordEntry<Declaration>>> {
    const afterDeclaring = this.declarationSettled;
    const nothing = new Map<string, RecordEntry<Declaration>>();
    let timer: NodeJS.Timeout | undefined;
    const entries = await Promise.race([
      this.hub.groups.get(this.p.key).catch((err: Error) => {
        this.log.debug({ key: this.p.key, err: err.message }, 'reading group declarations failed');
        return nothing;
      }),
      new Promise<typeof nothing>((resolve) => (timer = setTimeout(() => resolve(nothing), Math.max(0, end - Date.now())))),
    ]);
    clearTimeout(timer);
    if (afterDeclaring) this.readsAfterDeclaring++;
    // a banned peer is neither asked to lead nor waited for: to this node it is not in the swarm; a peer on other data is never grouped with
    const matching = [...entries.values()].filter((entry) => this.hub.banned(entry.owner) === undefined && this.schemaMatches(entry.owner, entry.value.schema) && this.dataMatches(entry.owner, entry.value.data));
    for (const entry of matching) {
      this.seen.add(entry.owner);
      if (!this.firstSeen.has(entry.owner)) this.firstSeen.set(entry.owner, Date.now());
      this.declared.set(entry.owner, entry.value);
    }
    return matching;
  }

  /**
   * Whether `peer` declared our tensor schema. A peer that declares another under the same key runs
   * another model or averaging settings, or another Cohort release (the schema hash carries versions
   * such as powersgd/2): the first time this node sees that peer with that schema, it says so.
   */
  private schemaMatches(peer: string, schema: string): boolean {
    if (peer === this.self || schema === this.p.schema) return true;
    if (this.hub.notices.first(`schema ${peer} ${schema} ${this.p.schema}`, OTHER_SCHEMA_NOTICE)) this.log.warn({ key: this.p.key, peer }, `not averaging with ${peer}: it declared tensor schema ${shortHash(schema)} under ${this.p.key}, this peer ${shortHash(this.p.schema)}; ${OTHER_SCHEMA}`);
    this.otherSchema.set(peer, schema);
    return false;
  }

  /** Whether `peer` trains on our data; the first time this node sees it on other data, says so with both hashes. */
  private dataMatches(peer: string, data: DataPins | null): boolean {
    if (peer === this.self || sameData(data, this.p.data)) return true;
    if (this.hub.notices.first(`data ${peer} ${describeDataPins(data)} ${describeDataPins(this.p.data)}`)) this.log.warn({ key: this.p.key, peer }, `not averaging with ${peer}: it trains on ${describeDataPins(data)}, this peer on ${describeDataPins(this.p.data)}`);
    this.mismatched.set(peer, data);
    return false;
  }

  /** The declared non-client peer of lowest leaderRank that has not refused us. */
  private async chooseLeader(end: number): Promise<string | undefined> {
    this.redirects = [];
    const entries = await this.readDeclarations(end);
    const now = Date.now();
    const candidates = new Set<string>();
    for (const entry of entries) {
      if (entry.value.clientMode || this.refusedBy.has(entry.owner) || (this.backoff.get(entry.owner) ?? 0) > now) continue;
      candidates.add(entry.owner);
    }
    // our own declaration may not be readable yet (replication in flight)
    if (!this.p.self.clientMode) candidates.add(this.self);
    this.seen.add(this.self);
    const ranked = [...candidates].map((peer) => ({ peer, rank: leaderRank(this.p.key, peer) })).sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : 0));
    return ranked[0]?.peer;
  }

  /**
   * Asks, once, each declared peer that has not joined this leader, alone, for SILENT_POLLS polls
   * what it is doing: a live server peer that ranks us first follows us within a poll of reading our
   * declaration, and a client-mode peer (which follows whoever leads) joins the first server that
   * takes it, so either has most likely averaged under this key already (ALREADY_RUNNING, recorded
   * as a refusal: a peer left behind by everyone learns so at once instead of leading an empty group
   * until its time is up). This peer stays the leader meanwhile; a server peer that accepts the
   * probe is alive and is left at once (its group drops our closed stream), so server peers are
   * asked one a poll, each accepted probe costing a leader a member it must drop. Client-mode peers
   * never accept one and are asked together: a swarm lab newcomer asking 21 NAT'd peers one a poll
   * would have outlasted its matchmaking time.
   */
  private async probeSilent(): Promise<void> {
    if (this.followers.length > 0) return;
    const now = Date.now();
    const silent = [...this.firstSeen].filter(([p, at]) => p !== this.self && this.declared.has(p) && !this.refusedBy.has(p) && !this.probed.has(p) && now - at >= SILENT_POLLS * this.p.pollIntervalMs).map(([p]) => p);
    const clients = silent.filter((p) => this.declared.get(p)!.clientMode);
    const server = silent.find((p) => !this.declared.get(p)!.clientMode);
    const asked = server === undefined ? clients : [...clients, server];
    for (const peer of asked) this.probed.add(peer);
    await Promise.all(asked.map((peer) => this.probe(peer)));
  }

  private async probe(peer: string): Promise<void> {
    const signal = deadline(DIAL_TIMEOUT_MS, this.p.signal);
    let framed: FramedStream | undefined;
    try {
      framed = new FramedStream(await this.node.dial(peer, MATCHMAKING_PROTOCOL, { signal }), MAX_CONTROL_BYTES, `matchmaking answer from ${peer}`);
      const { bandwidth, clientMode } = this.p.self;
      await framed.write({ t: 'join', key: this.p.key, schema: this.p.schema, data: this.p.data, bandwidth, clientMode } satisfies JoinRequest, signal);
      const answer = await framed.expect(joinResponseSchema, signal, 'the answer to a probe');
      if (answer.t === 'refused') this.onRefused(peer, answer.code, answer.message, answer.leader);
    } catch (err) {
      if (!this.isOtherRelease(peer, err)) this.log.debug({ peer, err: (err as Error).message }, 'probing a silent peer failed');
    } finally {
      framed?.abort(new Error('probe done'));
    }
  }

  /** `weight` lowered to what `peer` may carry (weightBound), logged when it is. */
  private bounded(peer: string, weight: number): number {
    const bound = this.p.weightBound?.(peer);
    if (bound === undefined || !(bound < weight)) return weight;
    this.log.warn({ peer, weight, bound }, `lowered the weight of ${peer} in the group from ${weight} to ${bound}, the progress it has been seen to make`);
    return Math.max(0, bound);
  }

  /**
   * What is wrong with a group description from `leader`, if anything: it must match our round and
   * settings (key, schema, size, compression, chunk size), be
   * led by `leader`, list us once as we joined (a weight no higher than ours), and list only peers
   * that declared under the key, with their declared bandwidth and mode and a weight within both
   * their declaration. A weight above this peer's bound for it is no reason to refuse (peers see
   * each other's progress at different moments): this peer's reducer lowers it (allreduce). Parts are
   * not on the wire: every member computes them (capped) from this list.
   */
  private async verify(group: GroupInfo, leader: string): Promise<string | undefined> {
    if (group.key !== this.p.key || group.schema !== this.p.schema || group.size !== this.p.size) return `its key, schema or size (${group.key}, ${group.size} values) differs from ours`;
    // the run fixes both for every peer: a leader's own is refused (with 1-value chunks every member
    // sends a frame per value, and a robust reducer holds a map per value of its part: 575 MB for 3 M)
    if (group.compression !== this.p.compression || group.chunkValues !== this.p.chunkValues) return `its compression or chunk size (${group.compression}, ${group.chunkValues} values) differs from ours (${this.p.compression}, ${this.p.chunkValues} values)`;
    if (group.members[0]!.peer !== leader) return `it is led by ${group.members[0]!.peer}, not by ${leader} who sent it`;
    if (group.members.length > this.p.targetGroupSize || group.members.length < this.p.minGroupSize) return `it has ${group.members.length} members, outside [${this.p.minGroupSize}, ${this.p.targetGroupSize}]`;
    const us = group.members.find((m) => m.peer === this.self);
    if (us === undefined) return 'it lacks us';
    if (us.bandwidth !== this.p.self.bandwidth || (this.p.self.clientMode && !us.clientMode)) return `it lists us with bandwidth ${us.bandwidth}${us.clientMode ? ' in client mode' : ''}, not as we joined`;
    if (!(us.weight <= this.p.weight.value!)) return `it gives us weight ${us.weight}, above our ${this.p.weight.value}`;
    const others = group.members.filter((m) => m.peer !== this.self);
    const banned = others.find((m) => this.hub.banned(m.peer) !== undefined);
    if (banned !== undefined) return `member ${banned.peer} is ${this.hub.banned(banned.peer)}`;
    if (others.some((m) => !this.declared.has(m.peer))) await this.readDeclarations(Date.now() + VERIFY_READ_TIMEOUT_MS);
    const unread: string[] = [];
    for (const m of others) {
      if (this.mismatched.has(m.peer)) return `member ${m.peer} trains on ${describeDataPins(this.mismatched.get(m.peer)!)}, this peer on ${describeDataPins(this.p.data)}`;
      const d = this.declared.get(m.peer);
      // a declaration this peer cannot read is no reason to refuse: among 8 peers on a loaded machine a
      // DHT read returned 5–7 of the 8 declarations even 30 s on (stores and reads reach different
      // replicas), and one member refusing fails the round for all. What such a member is listed
      // with is bounded anyway: its part by MAX_PART_SHARE_FACTOR, its weight by every reducer's bound.
      if (d === undefined) {
        unread.push(m.peer);
        continue;
      }
      if (m.bandwidth !== d.bandwidth || (d.clientMode && !m.clientMode)) return `member ${m.peer} is listed with bandwidth ${m.bandwidth}${m.clientMode ? ' in client mode' : ''}, but declared ${d.bandwidth}${d.clientMode ? ' in client mode' : ''}`;
      if (d.weight !== undefined && m.weight > d.weight) return `member ${m.peer} is given weight ${m.weight}, above the ${d.weight} it declared`;
    }
    if (unread.length > 0) this.log.debug({ leader, key: this.p.key, unread }, `accepted a group with ${unread.length} member(s) whose declarations this peer could not read`);
    return undefined;
  }

  /**
   * Leads until the group is full or time is up: the group, or the id of an earlier leader that
   * appeared (we then follow it), or undefined when too few peers joined.
   */
  private async lead(): Promise<GroupInfo | string | undefined> {
    this.role = { kind: 'leading' };
    let nextPoll = Date.now() + this.p.pollIntervalMs;
    for (;;) {
      while (!this.complete() && Date.now() < this.end() && !this.leftBehind()) {
        await this.sleep(Math.min(this.end(), nextPoll) - Date.now());
        this.prune();
        if (Date.now() >= nextPoll && Date.now() < this.end()) {
          nextPoll = Date.now() + this.p.pollIntervalMs;
          const leader = await this.chooseLeader(this.end());
          if (leader !== undefined && leader !== this.self) return leader;
          await this.probeSilent();
        }
      }
      this.prune();
      // a member whose stream closed as the group filled (a follower that gave up, a peer's probe)
      // left it short of minGroupSize: it stays open while time remains (bench allreduce, 8 of min 8:
      // a leader that closed with 8 and kept 7 failed the round for all)
      if (this.followers.length + 1 >= this.p.minGroupSize || Date.now() >= this.end() || this.leftBehind()) break;
    }
    this.role = { kind: 'done' };
    if (!this.enough()) return undefined;
    await this.awaitWeights();
    if (!this.enough()) return undefined;
    const wire: GroupWire = {
      id: randomBytes(16).toString('hex'),
      key: this.p.key,
      schema: this.p.schema,
      compression: this.p.compression,
      size: this.p.size,
      chunkValues: this.p.chunkValues,
      members: [{ ...this.p.self, weight: this.bounded(this.self, this.p.weight.value!) }, ...this.followers.map((f) => ({ ...f.member, weight: this.bounded(f.member.peer, f.weight!) }))],
    };
    const followers = this.followers.splice(0);
    await Promise.all(
      followers.map(async (f) => {
        await f.framed.write({ t: 'group', group: wire } satisfies JoinResponse, AbortSignal.timeout(2000)).catch(() => undefined);
        await f.framed.close(AbortSignal.timeout(2000));
        f.release();
      }),
    );
    return groupInfo(wire);
  }

  /**
   * Whether the group can close before its time is up: it is full, or this peer is ready and every
   * expected peer joined. A pre-scheduled leader that is not ready yet keeps it open, so a peer the
   * caller did not expect when it scheduled (its progress record was a refresh behind) can still join.
   */
  private complete(): boolean {
    const size = this.followers.length + 1;
    return size >= this.p.targetGroupSize || (this.p.weight.value !== undefined && size >= this.p.expectedPeers());
  }

  /** Whether the closed group still has `minGroupSize` members; if not, disbands it. */
  private enough(): boolean {
    const size = this.followers.length + 1;
    if (size >= this.p.minGroupSize) return true;
    this.disband('NOT_ENOUGH_PEERS', `leader ${this.self} gathered only ${size} of min ${this.p.minGroupSize} peers under ${this.p.key}`);
    return false;
  }

  /**
   * A closed group waits up to `readyTimeoutMs` for pre-scheduled members' weights (the leader's own
   * included); followers still without one are dropped with NOT_READY. A leader that is not ready
   * itself fails the round for everyone (its followers look again).
   */
  private async awaitWeights(): Promise<void> {
    const until = Date.now() + this.p.readyTimeoutMs;
    const waiting = (): boolean => this.p.weight.value === undefined || this.followers.some((f) => f.weight === undefined);
    while (waiting() && Date.now() < until) {
      this.p.signal?.throwIfAborted();
      await this.sleep(until - Date.now());
      this.prune();
    }
    this.p.signal?.throwIfAborted();
    const seconds = (this.p.readyTimeoutMs / 1000).toFixed(1);
    if (this.p.weight.value === undefined) {
      this.disband('NOT_READY', `leader ${this.self} was not ready within ${seconds} s of closing its group`);
      throw new MatchmakingError('NOT_READY', `this peer led a group under ${this.p.key} but was not ready to average within ${seconds} s of closing it`);
    }
    for (const f of this.followers.filter((x) => x.weight === undefined)) {
      this.followers.splice(this.followers.indexOf(f), 1);
      this.log.info({ key: this.p.key, peer: f.member.peer }, `dropped a pre-scheduled member not ready within ${seconds} s`);
      this.refuse(f, 'NOT_READY', `${f.member.peer} was not ready within ${seconds} s of the group closing`);
    }
  }

  /**
   * Asks `leader` to take us: the group once it closes, or the leader it named instead, or undefined to
   * look again. This peer's own group stays until `leader` answers as a leader (a peer refusing every
   * join would otherwise break it up at every ask); such an unverified leader, a named one (by
   * `hinter`, in a NOT_A_LEADER hint) or one chosen while this peer has followers, must answer within
   * FIRST_MESSAGE_TIMEOUT_MS, as an honest leader's `accepted` does: the followers wait on it until
   * then. A named one that does not answer as a leader (see misled) counts against `hinter`.
   */
  private async follow(leader: string, hinter?: string): Promise<GroupInfo | string | undefined> {
    let unverified = hinter !== undefined || this.followers.length > 0;
    this.role = { kind: 'following', leader, unverified };
    // a leader declared before us closes its group before our own time is up; allow one more period
    // for its reply, and the time a closed group waits for pre-scheduled members
    const signal = deadline(this.end() - Date.now() + this.p.matchmakingTimeMs + this.p.readyTimeoutMs, this.p.signal);
    let framed: FramedStream | undefined;
    /** The deadline of the answer awaited: the group's, or a named leader's first answer. */
    let answerBy: AbortSignal | undefined;
    try {
      const stream = await this.node.dial(leader, MATCHMAKING_PROTOCOL, { signal: deadline(DIAL_TIMEOUT_MS, signal) });
      framed = new FramedStream(stream, MAX_CONTROL_BYTES, `matchmaking answer from ${leader}`);
      const { bandwidth, clientMode } = this.p.self;
      const weight = this.p.weight.value;
      await framed.write({ t: 'join', key: this.p.key, schema: this.p.schema, data: this.p.data, ...(weight === undefined ? {} : { weight }), bandwidth, clientMode } satisfies JoinRequest, signal);
      for (;;) {
        answerBy = unverified ? deadline(FIRST_MESSAGE_TIMEOUT_MS, signal) : signal;
        const answer = await framed.expect(joinResponseSchema, answerBy, 'the group description');
        if (answer.t !== 'refused' && unverified) {
          // it answers as a leader: this peer's group goes to it, and so do later joiners
          unverified = false;
          this.disband('NOT_A_LEADER', `${this.self} joins ${leader}`, leader);
          this.role = { kind: 'following', leader, unverified: false };
        }
        if (answer.t === 'accepted') {
          // pre-scheduled: the weight goes to the leader once our caller has it, while we keep listening
          const out = framed;
          if (weight === undefined) this.p.weight.onSet(() => void out.write({ t: 'ready', weight: this.p.weight.value! } satisfies Ready, signal).catch((err: Error) => out.abort(err)));
          continue;
        }
        if (answer.t === 'refused') {
          const next = this.onRefused(leader, answer.code, answer.message, answer.leader);
          if (hinter !== undefined && unverified && this.refusedBy.has(leader) && !this.closed.has(leader)) this.misled(hinter, leader);
          return next;
        }
        // a description that lists a peer twice, or nobody who can reduce, is refused as a forged one is:
        // asked again (as an unreachable leader is), such a leader answers the same, and a peer leading
        // its own group leaves it to ask
        let group: GroupInfo | undefined;
        let problem: string | undefined;
        try {
          group = groupInfo(answer.group);
        } catch (err) {
          problem = (err as Error).message;
        }
        problem ??= await this.verify(group!, leader);
        if (problem !== undefined) {
          this.log.warn({ leader, key: this.p.key }, `refused the group description of leader ${leader}: ${problem}`);
          this.refusedBy.set(leader, `sent a bad group description: ${problem}`);
          framed.abort(new ProtocolError(`bad group description: ${problem}`));
          return undefined;
        }
        this.role = { kind: 'done' };
        await framed.close(AbortSignal.timeout(1000));
        return group;
      }
    } catch (err) {
      framed?.abort(err as Error);
      this.p.signal?.throwIfAborted();
      // a dial or stream that failed may be retried; a leader that stayed silent until the deadline
      // already cost this peer its matchmaking time and is not asked twice (a hostile leader that
      // takes joins and never answers would otherwise keep honest peers from any group), nor is a
      // named one silent past its first answer's time: asked again through each hint, it would cost
      // this peer that time each time (three tries outlast a matchmaking time)
      if (signal.aborted) this.refusedBy.set(leader, `silent until the deadline: ${(err as Error).message}`);
      else if (answerBy?.aborted === true) this.refusedBy.set(leader, `no answer to the join within ${FIRST_MESSAGE_TIMEOUT_MS / 1000} s (a leader answers at once)`);
      else if (!this.isOtherRelease(leader, err)) this.onUnreachable(leader, `unreachable: ${(err as Error).message}`);
      if (hinter !== undefined && unverified) this.misled(hinter, leader);
      return undefined;
    } finally {
      if (this.role.kind === 'following') this.role = this.idle();
    }
  }

  /**
   * Whether `err` says `peer` does not speak this release's matchmaking protocol: it declared under
   * the key, so it looks for a group, in another Cohort release (or it stopped averaging since, its
   * declaration still live). Such a peer is not asked again this round, and the first time this node
   * meets it, it says so.
   */
  private isOtherRelease(peer: string, err: unknown): boolean {
    if ((err as Error).name !== 'UnsupportedProtocolError') return false;
    const why = `it does not speak ${MATCHMAKING_PROTOCOL}: it runs another Cohort release (or stopped averaging since it declared)`;
    if (this.hub.notices.first(`protocol ${peer} ${MATCHMAKING_PROTOCOL}`, OTHER_RELEASE_NOTICE)) this.log.warn({ key: this.p.key, peer }, `not averaging with ${peer}: ${why}; ${OTHER_RELEASE}`);
    this.refusedBy.set(peer, why);
    this.otherRelease.add(peer);
    return true;
  }

  /** A leader whose dial or stream failed is asked again after a backoff (doubling), and given up after UNREACHABLE_TRIES. */
  private onUnreachable(leader: string, why: string): void {
    const tries = (this.unreachable.get(leader)?.tries ?? 0) + 1;
    this.log.debug({ leader, tries, err: why }, 'joining a leader failed');
    if (tries >= UNREACHABLE_TRIES) {
      this.unreachable.delete(leader);
      this.refusedBy.set(leader, `${why} (${tries} tries)`);
      return;
    }
    this.unreachable.set(leader, { tries, why });
    this.backoff.set(leader, Date.now() + 2 ** tries * this.p.pollIntervalMs);
  }

  /**
   * `hinter` named `named`, which did not answer as a leader (accepted, a group, or a CLOSED_GROUP
   * refusal): an honest peer names a leader that takes joins, so one naming a peer that refused this one
   * for the round (not looking under the key, silent, …) is not asked again in it, and one naming an
   * unreachable peer counts as unreachable itself (a crashed leader's follower may).
   */
  private misled(hinter: string, named: string): void {
    if (this.refusedBy.has(hinter)) return;
    const refused = this.refusedBy.get(named);
    if (refused !== undefined) this.refusedBy.set(hinter, `NOT_A_LEADER naming ${named}, which refused this peer (${refused})`);
    else if (this.unreachable.has(named)) this.onUnreachable(hinter, `NOT_A_LEADER naming ${named}, ${this.unreachable.get(named)!.why}`);
  }

  /** Records a refusal; returns the leader the refusing peer named, if worth asking. */
  private onRefused(leader: string, code: JoinRefusal, message: string, hint: string | undefined): string | undefined {
    this.log.debug({ leader, code, message }, 'leader refused us');
    if (FINAL_REFUSALS.has(code)) this.refusedBy.set(leader, `${code}: ${message}`);
    else this.backoff.set(leader, Date.now() + 2 * this.p.pollIntervalMs);
    if (CLOSED_GROUP.has(code)) this.closed.add(leader);
    if (code !== 'NOT_A_LEADER' || hint === undefined || hint === this.self) return undefined;
    if (this.refusedBy.has(hint)) {
      // naming a group that closed since the naming peer joined it is honest: that peer is only backed off
      if (!this.closed.has(hint)) this.misled(leader, hint);
      return undefined;
    }
    this.redirects.push(leader);
    const loop = this.redirects.indexOf(hint);
    if (loop >= 0) {
      // a peer naming itself, or peers naming each other: none of them leads (an honest follower names a
      // leader that takes joins), and asked again they would send this peer round until its time is up
      const cycle = this.redirects.slice(loop);
      for (const p of cycle) this.refusedBy.set(p, `NOT_A_LEADER: sent this peer round in a loop (${[...cycle, hint].join(' → ')})`);
      return undefined;
    }
    this.backoff.delete(hint);
    return hint;
  }

  /** A join request from `peer`, answered by role. */
  private async onJoin(framed: FramedStream, peer: string, request: JoinRequest): Promise<void> {
    const refuse = async (code: JoinRefusal, message: string, leader?: string): Promise<void> => {
      await framed.write({ t: 'refused', code, message, ...(leader ? { leader } : {}) } satisfies JoinResponse, AbortSignal.timeout(2000));
      await framed.close(AbortSignal.timeout(2000));
    };
    if (request.schema !== this.p.schema) return refuse('BAD_SCHEMA_HASH', `tensor schema ${shortHash(request.schema)} differs from ours (${shortHash(this.p.schema)})`);
    if (!sameData(request.data, this.p.data)) {
      this.dataMatches(peer, request.data); // logged once, and never chosen as a leader
      return refuse('DATA_MISMATCH', `${peer} trains on ${describeDataPins(request.data)}; ${this.self} on ${describeDataPins(this.p.data)}`);
    }
    // a leader this peer has not heard from is not passed on: it may lead nowhere
    if (this.role.kind === 'following') return refuse('NOT_A_LEADER', `${this.self} follows ${this.role.leader}`, this.role.unverified ? undefined : this.role.leader);
    if (this.role.kind === 'looking') return refuse('NOT_A_LEADER', `${this.self} is in client mode and cannot lead`);
    if (this.role.kind === 'done') return refuse('ALREADY_RUNNING', `${this.self} already closed its group under ${this.p.key}`);
    if (this.followers.length + 1 >= this.p.targetGroupSize) return refuse('GROUP_IS_FULL', `group of ${this.self} has ${this.p.targetGroupSize} peers`);
    if (this.followers.some((f) => f.member.peer === peer)) return refuse('BAD_REQUEST', `${peer} already joined`);
    const banned = this.hub.banned(peer);
    if (banned !== undefined) return refuse('BAD_REQUEST', `${peer} is ${banned}`);
    // the join request's claims are the member's declaration; a peer the swarm knows as a client stays one
    const clientMode = request.clientMode || this.node.isClientMode(peer) === true;
    await framed.write({ t: 'accepted' } satisfies JoinResponse, AbortSignal.timeout(2000));
    await new Promise<void>((release) => {
      const follower: Follower = { member: { peer, bandwidth: request.bandwidth, clientMode }, weight: request.weight, failed: false, framed, release };
      this.followers.push(follower);
      if (follower.weight === undefined) {
        // a pre-scheduled member: its weight comes once its caller has it (bounded by matchmaking + the ready wait)
        framed.expect(readySchema, deadline(this.p.matchmakingTimeMs + this.p.readyTimeoutMs, this.p.signal), 'its weight').then(
          (ready) => (follower.weight = ready.weight),
          () => (follower.failed = true),
        ).finally(() => this.notify());
      }
      this.notify();
    });
  }

  /** Drops followers whose stream closed while they waited. */
  private prune(): void {
    for (let i = this.followers.length - 1; i >= 0; i--) {
      const f = this.followers[i]!;
      if (f.failed || f.framed.stream.status !== 'open' || f.framed.stream.remoteWriteStatus !== 'writable') {
        this.followers.splice(i, 1);
        f.release();
      }
    }
  }

  private disband(code: JoinRefusal, message: string, leader?: string): void {
    for (const f of this.followers.splice(0)) this.refuse(f, code, message, leader);
  }

  private refuse(f: Follower, code: JoinRefusal, message: string, leader?: string): void {
    f.framed
      .write({ t: 'refused', code, message, ...(leader ? { leader } : {}) } satisfies JoinResponse, AbortSignal.timeout(2000))
      .then(() => f.framed.close(AbortSignal.timeout(2000)))
      .catch(() => undefined)
      .finally(f.release);
  }

  /**
   * Whether every other peer declared under the key has refused us for good (its round under this key
   * is over, or it looks under another) and none follows us: a peer that ended its epoch after the
   * others averaged it. Waiting out the matchmaking time could only let a later straggler join; the
   * caller's fallback (a local step) is better taken now, while the swarm's next round still waits
   * for this peer. A client-mode peer only needs the server peers' refusals: it can follow nobody
   * else, and the client-mode peers it never asks could not lead it (the swarm lab's NAT'd latecomers
   * waited out the matchmaking time: 32 peers, 21 of them client-mode). A late peer (`late`) with
   * nobody at all to group with gives up too, after LATE_READS reads that followed its declaration:
   * the round's declarations had expired, or only client-mode latecomers were left. Each such wait
   * cost a matchmaking time of about an epoch, so the peer came to the next round late again: NAT'd
   * peers of the swarm lab failed 5 to 36 rounds on end (docs/swarm.md).
   */
  private leftBehind(): boolean {
    if (this.followers.length > 0) return false;
    const others = this.groupable();
    if (others.length > 0) return others.every((p) => this.refusedBy.has(p));
    return this.p.late === true && this.readsAfterDeclaring >= LATE_READS;
  }

  /** Other peers declared under the key that this one could group with: a client-mode peer can only follow a server. */
  private groupable(): string[] {
    return [...this.seen].filter((p) => p !== this.self && !(this.p.self.clientMode && this.declared.get(p)?.clientMode === true));
  }

  private noGroup(): MatchmakingError {
    const seconds = ((Date.now() - this.started) / 1000).toFixed(1);
    const refusals = [...[...this.refusedBy].map(([peer, why]) => `${peer}: ${why}`), ...[...this.unreachable].map(([peer, u]) => `${peer}: ${u.why} (${u.tries} of ${UNREACHABLE_TRIES} tries)`)].join('; ');
    // every other peer trains on other data: this peer's volunteer must change that, not wait
    const dataRefusal = [...this.refusedBy.values()].find((why) => why.startsWith('DATA_MISMATCH'));
    const matchingOthers = [...this.seen].filter((p) => p !== this.self && !this.refusedBy.get(p)?.startsWith('DATA_MISMATCH'));
    if (matchingOthers.length === 0 && (this.mismatched.size > 0 || dataRefusal !== undefined)) {
      const theirs = [...new Set([...this.mismatched.values()].map(describeDataPins))];
      const what = theirs.length > 0 ? `${this.mismatched.size} peer(s) declared under key ${this.p.key} train on other data (${theirs.join('; ')})` : `a leader refused it (${dataRefusal})`;
      return new MatchmakingError('DATA_MISMATCH', `no group formed: this peer trains on ${describeDataPins(this.p.data)}, but ${what}; peers with other data never average together`);
    }
    // every other peer averages another schema or speaks another matchmaking version: waiting cannot help, a release or setting must change
    if (matchingOthers.every((p) => this.otherRelease.has(p)) && this.otherSchema.size + this.otherRelease.size > 0) {
      const theirs = [...new Set(this.otherSchema.values())].map(shortHash).join(', ');
      const what = [
        ...(this.otherSchema.size > 0 ? [`${this.otherSchema.size} declared tensor schema ${theirs}, this peer ${shortHash(this.p.schema)}`] : []),
        ...(this.otherRelease.size > 0 ? [`${this.otherRelease.size} do not speak ${MATCHMAKING_PROTOCOL}`] : []),
      ].join(' and ');
      return new MatchmakingError('BAD_SCHEMA_HASH', `no group formed: of the ${this.otherSchema.size + matchingOthers.length} other peer(s) declared under key ${this.p.key}, ${what}; ${this.otherSchema.size > 0 ? OTHER_SCHEMA : OTHER_RELEASE}`);
    }
    const seen = [...this.seen];
    const what =
      this.p.late === true && this.groupable().length === 0 && this.leftBehind()
        ? `the swarm stepped past this round and none of the ${seen.length - 1} other peer(s) declared under key ${this.p.key} could group with this one${this.p.self.clientMode ? ' (a client-mode peer can only follow a server peer)' : ''} (after ${seconds} s)`
        : seen.length < this.p.minGroupSize
        ? `only ${seen.length} of min ${this.p.minGroupSize} peers declared under key ${this.p.key} within ${seconds} s`
        : this.leftBehind()
          ? `all ${seen.length - 1} other peers declared under key ${this.p.key} already closed their groups or moved on (after ${seconds} s)`
          : `${seen.length} peers declared under key ${this.p.key} (min ${this.p.minGroupSize}) but none formed a group with us within ${seconds} s`;
    return new MatchmakingError('NO_GROUP', `no group formed: ${what} (seen: ${seen.map(short).join(', ')}${refusals ? `; refused by ${refusals}` : ''})`, seen.length <= 1);
  }

  private notify(): void {
    const wake = this.changed;
    this.changed = undefined;
    wake?.();
  }

  /** Sleeps `ms` or until a follower joins. */
  private async sleep(ms: number): Promise<void> {
    if (ms <= 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.changed = done;
    });
  }
}

/** What a volunteer should do when peers run another Cohort release. */
const OTHER_RELEASE = "peers average only with the same Cohort release: if this peer's is older than the swarm's, update it (the app updates itself on restart; `cohort --version` shows the CLI's)";
/** What a volunteer should know about peers declaring another tensor schema. */
const OTHER_SCHEMA = `the schema covers the model, the averaging settings and protocol versions (such as PowerSGD's), so ${OTHER_RELEASE}`;

function shortHash(hash: string): string {
  return `${hash.slice(0, 12)}…`;
}

function short(peer: string): string {
  return peer.length > 16 ? `…${peer.slice(-8)}` : peer;
}
