import { setMaxListeners } from 'node:events';
import type { PeerId } from '@libp2p/interface';
import type { Logger } from '../log/logger.js';
import type { SwarmNode } from '../swarm/index.js';
import { decode, encode, type Compression } from './compression.js';
import { ALLREDUCE_PROTOCOL, MAX_CHUNKS_IN_FLIGHT, MAX_DATA_FRAME_BYTES } from './constants.js';
import { startCpuMeter, type RoundCpu } from './cpu-meter.js';
import { ProtocolError } from './errors.js';
import { corrupt, type Fault } from './faults.js';
import { deadline, FramedStream, releasableDeadline } from './framing.js';
import type { GroupInfo } from './group.js';
import type { AveragingHub } from './hub.js';
import { chunkCount, chunkRange } from './load-balancing.js';
import { reducerMessageSchema, chunkSchema, type Begin, type Member } from './messages.js';
import { firstBeyond, PartReducer, PeerFault, type Aggregation } from './reducer.js';

export interface AllreduceOptions {
  /** A reducer excludes a sender that delivered no chunk for this long (ms). */
  readonly senderTimeoutMs: number;
  /** A sender gives up on a reducer that returned no chunk for this long (ms); its part keeps local values. */
  readonly reducerTimeoutMs: number;
  /** The whole all-reduce (ms); whatever is unfinished then keeps local values. */
  readonly allreduceTimeoutMs: number;
  /** Values beyond ±maxAbs are refused, from senders and from reducers. */
  readonly maxAbs: number;
  /** How this peer's reducer combines the chunks of its part. @default 'mean' */
  readonly aggregation?: Aggregation;
  /**
   * An averaged part that moved further than this × the norm of this peer's own values there keeps
   * the local values (state averaging: parameters are never replaced by what one bad reducer sent).
   * @default no bound
   */
  readonly maxRelativeChange?: number;
  /**
   * The most weight (samples) each other member may carry in this peer's part, from the progress this
   * peer has seen it make: a larger weight in the group description is lowered to it (clamped, not
   * excluded; listed in the result). Every reducer applies its own view. @default no bound
   */
  readonly weightBound?: (peer: string) => number;
  /**
   * Why this peer takes part as its own part's reducer only: its values stay out of every part, and it
   * tells the other reducers so at once (a stream closed before its first chunk), so the others'
   * round completes without them instead of waiting for a reducer that never came (PowerSGD's phase
   * Q after this peer's phase P failed). Its own result is of no use to it.
   */
  readonly withhold?: string;
  readonly signal?: AbortSignal;
  /** Fault injection for tests; never set in production. */
  readonly fault?: Fault;
}

/** A part of the vector that kept this peer's local values, and why. */
export interface FailedPart {
  readonly reducer: string;
  readonly start: number;
  readonly end: number;
  readonly reason: string;
}

export interface AllreduceResult {
  /** `complete`: every part averaged; `partial`: `failedParts` kept local values. */
  readonly status: 'complete' | 'partial';
  /** The averaged vector (a new array; the input is not modified). */
  readonly vector: Float32Array;
  readonly group: GroupInfo;
  /** Senders this peer's reducer dropped from its part, with the reason (stalled, disconnected, NaN…). */
  readonly excluded: ReadonlyArray<{ readonly peer: string; readonly reason: string }>;
  /** Members whose weight this peer's reducer lowered to their bound (weightBound). */
  readonly clamped: ReadonlyArray<{ readonly peer: string; readonly weight: number; readonly bound: number }>;
  readonly failedParts: readonly FailedPart[];
  /** Bytes this peer wrote and read on all-reduce streams (frames included). */
  readonly bytesSent: number;
  readonly bytesReceived: number;
  readonly durationMs: number;
  /** What the round cost this process's CPU: the main thread's busy time, the process's CPU, the bytes averaged. */
  readonly cpu: RoundCpu;  /** A PowerSGD round (both phases): its rank, and values of the gradient ÷ values each member sent in its place. */
  readonly powerSgd?: { readonly rank: number; readonly ratio: number };
}

/**
 * Butterfly all-reduce of `vector` within `group` (reduce-scatter, then all-gather on the same
 * streams): member i reduces `group.parts[i]`; every member streams its slice of each part to that
 * part's reducer in chunks and gets the weighted average of each chunk back as soon as every live
 * sender delivered it. Never throws for a peer's fault: what failed is listed in the result.
 */
export async function allreduce(node: SwarmNode, hub: AveragingHub, group: GroupInfo, vector: Float32Array, opts: AllreduceOptions, log: Logger): Promise<AllreduceResult> {
  const started = Date.now();
  const meter = startCpuMeter();
  const self = node.peerId.toString();
  const index = group.members.findIndex((m) => m.peer === self);
  if (index < 0) throw new RangeError(`peer ${self} is not a member of group ${group.id}`);
  if (vector.length !== group.size) throw new RangeError(`vector has ${vector.length} values; group ${group.id} averages ${group.size}`);
  // released when the round ends, so nothing of it (listeners, buffers) outlives it until the timeout
  const round = releasableDeadline(opts.allreduceTimeoutMs, opts.signal);
  const overall = round.signal;
  // every stream of the round (up to 2 per member) waits on this signal
  setMaxListeners(4 * group.members.length + 16, overall);
  const output = vector.slice();
  const failedParts: FailedPart[] = [];
  const traffic = { sent: 0, received: 0 };
  const fail = (reducer: number, reason: string): void => {
    const [start, end] = group.parts[reducer]!;
    output.set(vector.subarray(start, end), start);
    failedParts.push({ reducer: group.members[reducer]!.peer, start, end, reason });
  };

  const own = group.parts[index]![1] > group.parts[index]![0] ? new ReducerSession(hub, group, index, vector, output, opts, overall, log) : undefined;
  const closeSession = own === undefined ? undefined : hub.openSession(group.id, (framed, peer, begin) => own.accept(framed, peer, begin));
  // a member whose connection drops (crash, SIGKILL) may never have opened its stream: don't wait for the sender timeout
  const onDisconnect = (event: CustomEvent<PeerId>): void => own?.disconnected(event.detail.toString());
  node.libp2p.addEventListener('peer:disconnect', onDisconnect);
  try {
    const jobs = group.members.map(async (member, r) => {
      const [start, end] = group.parts[r]!;
      if (end === start) return;
      if (r === index) {
        const reason = await own!.done;
        if (reason !== undefined) fail(r, reason);
        return;
      }
      if (opts.withhold !== undefined) return withholdPart(node, hub, group, r, opts, overall);
      const reason = await sendPart(node, hub, group, r, vector, output, opts, overall, traffic);
      if (reason !== undefined) {
        log.warn({ group: group.id, reducer: member.peer, reason }, 'part not averaged; keeping local values');
        fail(r, reason);
      }
    });
    await Promise.all(jobs);
  } finally {
    round.release();
    closeSession?.();
    node.libp2p.removeEventListener('peer:disconnect', onDisconnect);
  }
  if (opts.maxRelativeChange !== undefined) {
    group.parts.forEach(([start, end], r) => {
      const moved = relativeChange(vector.subarray(start, end), output.subarray(start, end));
      if (moved > opts.maxRelativeChange! && !failedParts.some((p) => p.start === start)) fail(r, `the average moved the part by ${moved.toPrecision(3)}× its norm, above the ${opts.maxRelativeChange} accepted`);
    });
  }
  if (own !== undefined) {
    traffic.sent += own.traffic.sent;
    traffic.received += own.traffic.received;
  }
  const excluded = own === undefined ? [] : [...own.reducer.excludedPeers()].map(([peer, reason]) => ({ peer, reason }));
  failedParts.sort((a, b) => a.start - b.start);
  return {
    status: failedParts.length === 0 ? 'complete' : 'partial',
    vector: output,
    group,
    excluded,
    clamped: own?.clamped ?? [],
    failedParts,
    bytesSent: traffic.sent,
    bytesReceived: traffic.received,
    cpu: meter(vector.byteLength), // measured within durationMs's window
    durationMs: Date.now() - started,
  };
}

/** Streams our slice of part `r` to its reducer and writes the returned averages; the reason if it failed. */
async function sendPart(
  node: SwarmNode,
  hub: AveragingHub,
  group: GroupInfo,
  r: number,
  vector: Float32Array,
  output: Float32Array,
  opts: AllreduceOptions,
  overall: AbortSignal,
  traffic: { sent: number; received: number },
): Promise<string | undefined> {
  const reducer = group.members[r]!.peer;
  const [start, end] = group.parts[r]!;
  const size = end - start;
  const chunks = chunkCount(size, group.chunkValues);
  const self = group.members.find((m) => m.peer === node.peerId.toString())!;
  let framed: FramedStream | undefined;
  const abort = new AbortController();
  let wakeWriter: (() => void) | undefined;
  const signal = AbortSignal.any([overall, abort.signal]);
  try {
    const stream = await node.dial(reducer, ALLREDUCE_PROTOCOL, { signal: deadline(opts.reducerTimeoutMs, signal), allowRelayed: false });
    framed = new FramedStream(stream, MAX_DATA_FRAME_BYTES, `all-reduce answer from reducer ${reducer}`, hub.upload);
    const out = framed;
    await out.write({ t: 'begin', group: group.id, part: r, weight: self.weight } satisfies Begin, signal);
    // chunks sent but not yet answered: the averages are our acknowledgements. Bounding them keeps
    // megabytes from queueing in the muxer ahead of everything else on the connection (libp2p's
    // pings time out behind such a queue on a slow link and the connection is dropped)
    let answered = 0;
    const writing = (async () => {
      for (let i = 0; i < chunks; i++) {
        while (i - answered >= MAX_CHUNKS_IN_FLIGHT) {
          signal.throwIfAborted();
          await new Promise<void>((resolve) => (wakeWriter = resolve));
        }
        const [s, e] = chunkRange(size, group.chunkValues, i);
        const values = corrupt(opts.fault, i, vector.subarray(start + s, start + e));
        if (values === 'stall') return;
        await out.writeChunk(i, encode(group.compression, values), signal);
      }
    })();
    writing.catch(() => undefined);
    for (let i = 0; i < chunks; i++) {
      // decoded at once into the output: the frame's bytes may live in the stream's reused buffer
      const message = await out.expectTransient(reducerMessageSchema, deadline(opts.reducerTimeoutMs, signal), `averaged chunk ${i} of ${chunks}`);
      if (message.t === 'refused') throw new ProtocolError(`reducer ${reducer} refused us: ${message.code}: ${message.message}`);
      if (message.i !== i) throw new ProtocolError(`reducer ${reducer} sent averaged chunk ${message.i}, expected ${i}`);
      const [s, e] = chunkRange(size, group.chunkValues, i);
      // straight into the result: a failed part gets its local values back (fail())
      decodeChunk(group.compression, message.d, output.subarray(start + s, start + e), opts.maxAbs, reducer, `averaged chunk ${i}`);
      answered = i + 1;
      wakeWriter?.();
    }
    await writing;
    await out.close(deadline(1000, overall));
    return undefined;
  } catch (err) {
    abort.abort();
    framed?.abort(err as Error);
    wakeWriter?.();
    // an answer that would poison the average counts towards a ban, as a poisoned part from a sender does
    if (err instanceof PeerFault && err.poisoned) return hub.recordOffence(reducer, err.message) ? `${err.message}; ${hub.banned(reducer)}` : err.message;
    if (overall.aborted) return opts.signal?.aborted ? 'cancelled' : `all-reduce timeout (${opts.allreduceTimeoutMs} ms) before reducer ${reducer} returned its part`;
    return (err as Error).name === 'TimeoutError' ? `reducer ${reducer} returned nothing for ${opts.reducerTimeoutMs} ms` : (err as Error).message;
  } finally {
    if (framed !== undefined) {
      traffic.sent += framed.sent;
      traffic.received += framed.received;
    }
  }
}

/** Tells part `r`'s reducer at once that this peer sends it nothing (its Begin, then the stream's end): it need not wait the sender timeout. */
async function withholdPart(node: SwarmNode, hub: AveragingHub, group: GroupInfo, r: number, opts: AllreduceOptions, overall: AbortSignal): Promise<void> {
  const reducer = group.members[r]!.peer;
  const self = group.members.find((m) => m.peer === node.peerId.toString())!;
  try {
    const stream = await node.dial(reducer, ALLREDUCE_PROTOCOL, { signal: deadline(opts.reducerTimeoutMs, overall), allowRelayed: false });
    const framed = new FramedStream(stream, MAX_DATA_FRAME_BYTES, `all-reduce stream to reducer ${reducer}`, hub.upload);
    await framed.write({ t: 'begin', group: group.id, part: r, weight: self.weight } satisfies Begin, deadline(opts.reducerTimeoutMs, overall));
    await framed.close(deadline(1000, overall));
  } catch {
    // unreachable or gone: it leaves this peer out after the sender timeout all the same
  }
}

/** ‖after − before‖ ÷ ‖before‖ (Infinity when `before` is all zeros and `after` is not). */
function relativeChange(before: Float32Array, after: Float32Array): number {
  let moved = 0;
  let norm = 0;
  for (let i = 0; i < before.length; i++) {
    moved += (after[i]! - before[i]!) ** 2;
    norm += before[i]! ** 2;
  }
  return moved === 0 ? 0 : Math.sqrt(moved / norm);
}

/**
 * Decodes `reducer`'s answer into `values` and refuses NaN/Inf and magnitudes beyond `maxAbs` (a
 * reducer's answer is untrusted too): a poisoned PeerFault, an offence like a sender's.
 */
function decodeChunk(compression: Compression, bytes: Uint8Array, values: Float32Array, maxAbs: number, reducer: string, what: string): void {
  try {
    decode(compression, bytes, values.length, values);
  } catch (err) {
    throw new ProtocolError(`${what} from reducer ${reducer}: ${(err as Error).message}`, { cause: err });
  }
  const bad = firstBeyond(values, maxAbs);
  if (bad >= 0) throw new PeerFault(reducer, `${what} holds ${values[bad]} at ${bad}, not a finite value within ±${maxAbs}`, true);
}

interface SenderState {
  framed: FramedStream | undefined;
  /** Serialises writes of averaged chunks to this sender. */
  writes: Promise<void>;
  watchdog: NodeJS.Timeout;
}

/** This peer's reducer of its own part: feeds a PartReducer from every sender's stream and answers with averages. */
class ReducerSession {
  readonly reducer: PartReducer;
  readonly traffic = { sent: 0, received: 0 };
  readonly clamped: Array<{ peer: string; weight: number; bound: number }> = [];
  /** Resolves with undefined when the part is averaged, else with why not. */
  readonly done: Promise<string | undefined>;
  private finish!: (reason: string | undefined) => void;
  private readonly senders = new Map<string, SenderState>();
  private next = 0;
  private readonly start: number;
  private readonly self: string;
  private finished = false;

  constructor(
    private readonly hub: AveragingHub,
    private readonly group: GroupInfo,
    private readonly index: number,
    vector: Float32Array,
    private readonly output: Float32Array,
    private readonly opts: AllreduceOptions,
    private readonly overall: AbortSignal,
    private readonly log: Logger,
  ) {
    this.done = new Promise((resolve) => (this.finish = resolve));
    const [start, end] = group.parts[index]!;
    this.start = start;
    this.self = group.members[index]!.peer;
    const weight = (m: Member): number => {
      const bound = m.peer === this.self ? undefined : opts.weightBound?.(m.peer);
      if (bound === undefined || !(m.weight > bound)) return m.weight;
      this.clamped.push({ peer: m.peer, weight: m.weight, bound });
      return Math.max(0, bound);
    };
    this.reducer = new PartReducer(end - start, group.chunkValues, new Map(group.members.map((m) => [m.peer, weight(m)])), { maxAbs: opts.maxAbs, ...(opts.aggregation ? { aggregation: opts.aggregation } : {}) });
    if (opts.withhold !== undefined) this.reducer.exclude(this.self, opts.withhold);
    else this.addOwn(vector);
    for (const m of group.members) {
      if (m.peer === this.self) continue;
      const watchdog = setTimeout(() => this.exclude(m.peer, `sent nothing for ${opts.senderTimeoutMs} ms`), opts.senderTimeoutMs);
      this.senders.set(m.peer, { framed: undefined, writes: Promise.resolve(), watchdog });
    }
    overall.addEventListener('abort', () => this.end(opts.signal?.aborted ? 'cancelled' : `all-reduce timeout (${opts.allreduceTimeoutMs} ms) with chunks ${this.next}/${this.reducer.chunks} averaged; waiting for ${this.reducer.pending(this.next).join(', ')}`), { once: true });
    this.flush();
  }

  private addOwn(vector: Float32Array): void {
    const start = this.start;
    try {
      for (let i = 0; i < this.reducer.chunks; i++) {
        const [s, e] = chunkRange(this.reducer.size, this.group.chunkValues, i);
        this.reducer.add(this.self, i, vector.subarray(start + s, start + e));
      }
    } catch (err) {
      // this peer's own values are poisoned (its gradients blew up): it reduces the others' values without them
      if (!(err instanceof PeerFault)) throw err;
      this.log.warn({ group: this.group.id, reason: err.message }, "left this peer's own values out of the part it reduces");
      this.reducer.exclude(this.self, err.message);
    }
  }

  /** An inbound sender stream, after its Begin. */
  async accept(framed: FramedStream, peer: string, begin: Begin): Promise<void> {
    const state = this.senders.get(peer);
    const member = this.group.members.find((m) => m.peer === peer);
    const refuse = async (code: 'NOT_A_MEMBER' | 'NOT_A_REDUCER' | 'BAD_BEGIN', message: string): Promise<void> => {
      await framed.write({ t: 'refused', code, message }, AbortSignal.timeout(1000)).catch(() => undefined);
      framed.abort(new ProtocolError(message));
    };
    if (state === undefined || member === undefined) return refuse('NOT_A_MEMBER', `${peer} is not a member of group ${this.group.id}`);
    if (begin.part !== this.index) return refuse('NOT_A_REDUCER', `this peer reduces part ${this.index}, not ${begin.part}`);
    if (state.framed !== undefined || this.reducer.excludedPeers().has(peer)) return refuse('BAD_BEGIN', `${peer} already sent (or was excluded from) this part`);
    // the weight comes from the group description; a sender claiming another one is lying or confused
    if (begin.weight !== member.weight) {
      this.exclude(peer, `claimed weight ${begin.weight}, the group agreed on ${member.weight}`);
      return refuse('BAD_BEGIN', `weight ${begin.weight} differs from the group description's ${member.weight}`);
    }
    // a sender that connects late has missed nothing: no chunk is answered before every live sender delivered it
    state.framed = framed;
    const size = this.reducer.size;
    // each chunk is decoded into this sender's one scratch array, which the reducer adds or copies at once
    const scratch = new Float32Array(Math.min(size, this.group.chunkValues));
    try {
      for (let i = 0; i < this.reducer.chunks; i++) {
        const message = await framed.expectTransient(chunkSchema, this.overall, `chunk ${i} of ${this.reducer.chunks}`);
        const [s, e] = chunkRange(size, this.group.chunkValues, message.i < this.reducer.chunks ? message.i : i);
        let values: Float32Array;
        try {
          values = decode(this.group.compression, message.d, e - s, scratch.subarray(0, e - s));
        } catch (err) {
          throw new PeerFault(peer, `chunk ${message.i}: ${(err as Error).message}`);
        }
        this.reducer.add(peer, message.i, values);
        state.watchdog.refresh();
        this.flush();
      }
      clearTimeout(state.watchdog);
    } catch (err) {
      if (this.finished) return;
      const reason = err instanceof PeerFault ? err.message.replace(`peer ${peer}: `, '') : `stream failed: ${(err as Error).message}`;
      this.exclude(peer, reason);
      if (err instanceof PeerFault && err.poisoned && this.hub.recordOffence(peer, reason)) this.log.warn({ peer, reason }, `banned peer ${peer} from averaging for this run: ${this.hub.banned(peer)}`);
    }
  }

  /** The swarm lost every connection to `peer`. */
  disconnected(peer: string): void {
    if (this.senders.has(peer)) this.exclude(peer, 'disconnected');
  }

  /** Answers every chunk that every live sender has delivered, in order. */
  private flush(): void {
    if (this.finished || this.opts.fault === 'stall-reducing') return;
    while (this.next < this.reducer.chunks && this.reducer.isChunkDone(this.next)) {
      const i = this.next++;
      let average: Float32Array;
      try {
        average = this.reducer.chunkAverage(i);
      } catch (err) {
        this.end((err as Error).message);
        return;
      }
      if (this.opts.fault === 'lie-reducing') average.fill(1e7);
      if (this.opts.fault === 'nan-reducing') average.fill(Number.NaN);
      const bytes = encode(this.group.compression, average);
      // every member must end with the same values, so we keep what the others decode
      const local = this.group.compression === 'none' ? average : decode(this.group.compression, bytes, average.length);
      const [s] = chunkRange(this.reducer.size, this.group.chunkValues, i);
      this.output.set(local, this.start + s);
      for (const [peer, state] of this.senders) if (state.framed !== undefined && !this.reducer.excludedPeers().has(peer)) this.send(state, i, bytes);
    }
    if (this.next === this.reducer.chunks) this.end(undefined);
  }

  private send(state: SenderState, i: number, bytes: Uint8Array): void {
    const framed = state.framed!;
    state.writes = state.writes.then(() => framed.writeChunk(i, bytes, this.overall)).catch(() => undefined);
  }

  private exclude(peer: string, reason: string): void {
    if (this.finished || this.reducer.excludedPeers().has(peer)) return;
    this.log.warn({ group: this.group.id, peer, reason }, 'excluded a sender from this all-reduce part');
    this.reducer.exclude(peer, reason);
    const state = this.senders.get(peer);
    if (state !== undefined) {
      clearTimeout(state.watchdog);
      const framed = state.framed;
      if (framed !== undefined) {
        state.writes = state.writes
          .then(() => framed.write({ t: 'refused', code: 'EXCLUDED', message: reason }, AbortSignal.timeout(1000)))
          .catch(() => undefined)
          .finally(() => framed.abort(new ProtocolError(`excluded: ${reason}`)));
      }
    }
    this.flush();
  }

  /** Ends the session: on success once every answer is written and the streams are closed. */
  private end(reason: string | undefined): void {
    if (this.finished) return;
    this.finished = true;
    const closing = [...this.senders.values()].map(async (state) => {
      clearTimeout(state.watchdog);
      const framed = state.framed;
      if (framed === undefined) return;
      if (reason === undefined) await state.writes.then(() => framed.close(deadline(5000, this.overall)));
      else framed.abort(new Error(reason));
      this.traffic.sent += framed.sent;
      this.traffic.received += framed.received;
    });
    // settled, not all: a stream that fails to close must not keep the part from finishing
    void Promise.allSettled(closing).then(() => this.finish(reason));
  }
}
