import type { Connection, Stream } from '@libp2p/interface';
import type { RecordNamespace, SwarmNode } from '../swarm/index.js';
import type { Notices } from '../util/notices.js';
import { ALLREDUCE_PROTOCOL, BAN_AFTER_OFFENCES, FIRST_MESSAGE_TIMEOUT_MS, GROUP_NAMESPACE, MATCHMAKING_PROTOCOL, MAX_CONTROL_BYTES, MAX_DATA_FRAME_BYTES, STATE_NAMESPACE, STATE_PROTOCOL } from './constants.js';
import { FramedStream } from './framing.js';
import type { StateProvider } from './state-provider.js';
import { UploadLimit } from './upload-limit.js';
import {
  beginSchema,
  declarationSchema,
  joinRequestSchema,
  stateAdvertSchema,
  stateRequestSchema,
  type Begin,
  type Declaration,
  type JoinRequest,
  type StateAdvert,
  type StateRequest,
} from './messages.js';

/** Serves one inbound stream after its first message; `peer` is authenticated by the connection. */
export type Handler<M> = (framed: FramedStream, peer: string, first: M) => Promise<void>;

/** Poisoned averaging parts a peer sent this node in one run, with the last reason. */
export interface Offence {
  readonly peer: string;
  readonly count: number;
  readonly reason: string;
}

/** Where a node keeps its offences for the run (the store's `offences.forRun`), so bans outlive a restart. */
export interface OffenceLedger {
  load(): Iterable<Offence>;
  record(offence: Offence): void;
}

/**
 * A sender may reach a reducer before the reducer has the group description (the leader sends it
 * to followers one after another): its Begin waits this long for the session to appear.
 */
const SESSION_WAIT_MS = 5000;

/**
 * What every averager on one swarm node shares: the protocol handlers (registered once per node;
 * they route by the group key, group id or prefix in the first message) and the record namespaces.
 * Several averagers (gradients, optimizer state) can run on one node.
 */
export class AveragingHub {
  private static readonly hubs = new WeakMap<SwarmNode, AveragingHub>();
  readonly groups: RecordNamespace<Declaration>;
  readonly donors: RecordNamespace<StateAdvert>;
  /** group key → the matchmaker looking for a group under it */
  readonly matchmakers = new Map<string, Handler<JoinRequest>>();
  /** group id → the reducer of this peer's part in that group */
  readonly sessions = new Map<string, Handler<Begin>>();
  /** averager prefix → its state server: the handler of downloads, and the state it serves (read by the node's other averagers: a coordinator checkpointing the trainer beside it) */
  readonly stateServers = new Map<string, { readonly handler: Handler<StateRequest>; readonly provider: StateProvider }>();
  private readonly sessionWaiters = new Map<string, Set<() => void>>();
  /** group keys under which this node already joined a group (late joiners get ALREADY_RUNNING) */
  private readonly running = new Set<string>();
  /** Poisoned parts each peer sent this node's reducers, and the last reason (the node lives as long as its run; `keepOffences` keeps them longer). */
  private readonly offences = new Map<string, { count: number; reason: string }>();
  private ledger: OffenceLedger | undefined;
  /** What this node already told its volunteer about other peers (another schema, another protocol version): the node's own (SwarmNode.notices), told once per node, not per round. */
  readonly notices: Notices;
  /** The node's upload cap for averaging traffic, one bucket for every averager and stream; none by default. */
  private uploadLimit: UploadLimit | undefined;
  private users = 0;
  private registering: Promise<void> | undefined;

  private constructor(private readonly node: SwarmNode) {
    this.notices = node.notices;
    this.groups = node.registerNamespace(GROUP_NAMESPACE, declarationSchema, { maxValueBytes: 1024 });
    this.donors = node.registerNamespace(STATE_NAMESPACE, stateAdvertSchema, { maxValueBytes: 256 });
  }

  static of(node: SwarmNode): AveragingHub {
    let hub = AveragingHub.hubs.get(node);
    if (hub === undefined) {
      hub = new AveragingHub(node);
      AveragingHub.hubs.set(node, hub);
    }
    return hub;
  }

  get upload(): UploadLimit | undefined {
    return this.uploadLimit;
  }

  /** Caps this node's averaging upload; averagers asking for the same cap share one bucket (a different cap replaces it). */
  limitUpload(bytesPerSecond: number): void {
    if (this.uploadLimit?.bytesPerSecond !== bytesPerSecond) this.uploadLimit = new UploadLimit(bytesPerSecond);
  }

  /** Registers the protocol handlers on first use. */
  async acquire(): Promise<void> {
    this.users++;
    this.registering ??= this.register();
    await this.registering;
  }

  async release(): Promise<void> {
    if (--this.users > 0 || this.registering === undefined) return;
    this.registering = undefined;
    await Promise.all([MATCHMAKING_PROTOCOL, ALLREDUCE_PROTOCOL, STATE_PROTOCOL].map((p) => this.node.unhandle(p).catch(() => undefined)));
  }

  /**
   * Counts a poisoned part (NaN/Inf, values beyond maxAbs) `peer` sent; at BAN_AFTER_OFFENCES it is
   * banned from this node's groups for the run (every averager of the node). Returns whether this
   * offence banned it.
   */
  recordOffence(peer: string, reason: string): boolean {
    const count = (this.offences.get(peer)?.count ?? 0) + 1;
    this.offences.set(peer, { count, reason });
    this.ledger?.record({ peer, count, reason });
    return count === BAN_AFTER_OFFENCES;
  }

  /**
   * Takes the offences (and so the bans) `ledger` holds for this node's run, and records every later
   * one there: a node restarted on the same store keeps refusing the peers it banned.
   */
  keepOffences(ledger: OffenceLedger): void {
    for (const o of ledger.load()) {
      if (o.count > (this.offences.get(o.peer)?.count ?? 0)) this.offences.set(o.peer, { count: o.count, reason: o.reason });
    }
    this.ledger = ledger;
  }

  /** Why `peer` is banned from this node's groups, or undefined when it is not. */
  banned(peer: string): string | undefined {
    const o = this.offences.get(peer);
    return o !== undefined && o.count >= BAN_AFTER_OFFENCES ? `banned for this run after ${o.count} poisoned parts (last: ${o.reason})` : undefined;
  }

  /** Remembers, until the declarations under `key` expire, that this node already found its group there. */
  markRunning(key: string, forMs: number): void {
    this.running.add(key);
    setTimeout(() => this.running.delete(key), forMs).unref();
  }

  openSession(groupId: string, handler: Handler<Begin>): () => void {
    this.sessions.set(groupId, handler);
    for (const wake of this.sessionWaiters.get(groupId) ?? []) wake();
    return () => this.sessions.delete(groupId);
  }

  private async waitForSession(groupId: string): Promise<Handler<Begin> | undefined> {
    if (this.sessions.has(groupId)) return this.sessions.get(groupId);
    await new Promise<void>((resolve) => {
      const waiters = this.sessionWaiters.get(groupId) ?? new Set();
      this.sessionWaiters.set(groupId, waiters);
      const done = (): void => {
        clearTimeout(timer);
        waiters.delete(done);
        if (waiters.size === 0) this.sessionWaiters.delete(groupId);
        resolve();
      };
      const timer = setTimeout(done, SESSION_WAIT_MS);
      waiters.add(done);
    });
    return this.sessions.get(groupId);
  }

  private async register(): Promise<void> {
    await this.node.handle(
      MATCHMAKING_PROTOCOL,
      this.inbound(MATCHMAKING_PROTOCOL, joinRequestSchema, async (framed, peer, request) => {
        const matchmaker = this.matchmakers.get(request.key);
        if (matchmaker !== undefined) return matchmaker(framed, peer, request);
        if (this.running.has(request.key)) {
          await framed.write({ t: 'refused', code: 'ALREADY_RUNNING', message: `already averaging in a group under ${request.key}` });
          return framed.close();
        }
        const prefix = request.key.slice(0, request.key.lastIndexOf(':') + 1);
        const other = [...this.matchmakers.keys()].find((k) => k.startsWith(prefix));
        await framed.write(
          other === undefined
            ? { t: 'refused', code: 'NOT_LOOKING_FOR_GROUP', message: `not looking for a group under ${request.key}` }
            : { t: 'refused', code: 'EPOCH_MISMATCH', message: `looking for a group under ${other}, not ${request.key}` },
        );
        await framed.close();
      }),
      { maxInboundStreams: 16 },
    );
    // data streams go over direct connections only: relays cap a connection at 128 KiB
    await this.node.handle(
      ALLREDUCE_PROTOCOL,
      this.inbound(ALLREDUCE_PROTOCOL, beginSchema, async (framed, peer, begin) => {
        framed.limitFrames(MAX_DATA_FRAME_BYTES); // chunks follow the begin
        const session = await this.waitForSession(begin.group);
        if (session !== undefined) return session(framed, peer, begin);
        await framed.write({ t: 'refused', code: 'UNKNOWN_GROUP', message: `no all-reduce of group ${begin.group} here (finished, failed or never joined)` });
        await framed.close();
      }),
      { maxInboundStreams: 16, allowRelayed: false },
    );
    await this.node.handle(
      STATE_PROTOCOL,
      this.inbound(STATE_PROTOCOL, stateRequestSchema, async (framed, peer, request) => {
        const server = this.stateServers.get(request.prefix);
        if (server !== undefined) return server.handler(framed, peer, request);
        await framed.write({ t: 'refused', code: 'NO_STATE', message: `this peer serves no state for "${request.prefix}"` });
        await framed.close();
      }),
      { maxInboundStreams: 16, allowRelayed: false },
    );
  }

  /**
   * A handler reading a first message of `schema`, then routing the stream. The first frame is capped
   * at MAX_CONTROL_BYTES whatever the protocol's frames: a stranger must not make a node buffer a data
   * frame (4 MiB) per stream before it said who it is; `route` raises the cap where data follows.
   */
  private inbound<M>(protocol: string, schema: import('zod').ZodType<M>, route: Handler<M>) {
    return (stream: Stream, connection: Connection): void => {
      const peer = connection.remotePeer.toString();
      const framed = new FramedStream(stream, MAX_CONTROL_BYTES, `${protocol} stream from ${peer}`, this.upload);
      framed
        .expect(schema, AbortSignal.timeout(FIRST_MESSAGE_TIMEOUT_MS), 'its first message')
        .then((first) => route(framed, peer, first))
        .catch((err: Error) => framed.abort(err));
    };
  }
}
