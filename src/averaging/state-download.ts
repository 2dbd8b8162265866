import { createHash } from 'node:crypto';
import type { Logger } from '../log/logger.js';
import type { SwarmNode } from '../swarm/index.js';
import { OTHER_RELEASE_NOTICE } from '../util/notices.js';
import { encode as cborEncode } from 'cborg';
import { MAX_STATE_CHUNK_BYTES, MAX_STATE_METADATA_BYTES, MIN_STATE_CHUNK_BYTES, STATE_NAMESPACE, STATE_PROTOCOL } from './constants.js';
import { ProtocolError, StateDownloadError } from './errors.js';
import { deadline, FramedStream, minRateDeadline, type MinRateDeadline } from './framing.js';
import type { AveragingHub, Handler } from './hub.js';
import { ServingSlots } from './serving-slots.js';
import type { StateProvider, StateSnapshot } from './state-provider.js';
import { stateDataSchema, stateHeaderSchema, type StateHeader, type StateMetadata, type StateRequest } from './messages.js';

export interface StateServerOptions {
  /** Downloads served at once, one per peer. */
  readonly maxConcurrentDownloads: number;
  readonly chunkBytes: number;
  readonly stallTimeoutMs: number;
  /**
   * A download whose reader keeps this donor waiting longer than a stall timeout plus its bytes at
   * this rate (time under the upload cap does not count) is ended, and the reader refused BUSY for
   * SLOW_READER_REFUSED_MS: one taking a chunk just within the stall timeout would hold a slot for
   * ever. The averager passes the rate a newcomer asks of a donor.
   */
  readonly minReaderBytesPerSecond: number;
  readonly advertiseIntervalMs: number;
}

export interface LoadStateOptions {
  readonly maxStateBytes: number;
  readonly stallTimeoutMs: number;
  /** A download averaging under this (after a stall timeout's grace) is left for the next donor; not the last one's. */
  readonly minBytesPerSecond: number;
  readonly maxDonors: number;
  /** Only donors at this epoch or later. */
  readonly minEpoch?: number;
  /** Peers whose advertisement backs a state on its own (the run's coordinator). @default none */
  readonly trusted?: readonly string[];
  readonly signal?: AbortSignal;
}

export interface LoadedState extends StateSnapshot {
  readonly metadata: StateMetadata;
  readonly donor: string;
  /** Donors tried before this one, with why they failed (BUSY, checksum, timeout…). */
  readonly failed: ReadonlyArray<{ readonly peer: string; readonly error: string }>;
  readonly durationMs: number;
}

function stateKey(prefix: string): string {
  return `${STATE_NAMESPACE}/${prefix}`;
}

/** The node's notice that `peer` does not speak this STATE_PROTOCOL (another Cohort release): told once, and the peer is not asked again. */
function otherReleaseNotice(peer: string): string {
  return `state ${peer} ${STATE_PROTOCOL}`;
}

/**
 * Serves this peer's state on `state/2.0.0` for one prefix and advertises its epoch and hash under
 * `state/<prefix>`. At most `maxConcurrentDownloads` at a time, one per peer (a peer cannot hold
 * them all); more are refused with BUSY so newcomers spread over donors instead of swamping one
 * (hivemind #169).
 */
export class StateServer {
  private readonly slots: ServingSlots;
  private timer: NodeJS.Timeout | undefined;
  /** The sha256 of the state served at `epoch`, and the hashing under way. */
  private hashed: { epoch: number; sha256: string } | undefined;
  private hashing: Promise<void> | undefined;
  private readonly handler: Handler<StateRequest> = (framed, peer, request) => this.serve(framed, peer, request);
  served = 0;

  constructor(
    private readonly hub: AveragingHub,
    private readonly prefix: string,
    readonly provider: StateProvider,
    private readonly opts: StateServerOptions,
    private readonly log: Logger,
  ) {
    this.slots = new ServingSlots(opts.maxConcurrentDownloads, 1);
  }

  async start(): Promise<void> {
    if (this.hub.stateServers.has(this.prefix)) throw new RangeError(`state for "${this.prefix}" is already served on this node`);
    this.hub.stateServers.set(this.prefix, { handler: this.handler, provider: this.provider });
    await this.advertise();
    this.timer = setInterval(() => void this.advertise(), this.opts.advertiseIntervalMs);
    this.timer.unref();
  }

  private get serving(): boolean {
    return this.hub.stateServers.get(this.prefix)?.handler === this.handler;
  }

  stop(): void {
    clearInterval(this.timer);
    // only its own: another averager of this node may serve the prefix once this one withdrew
    if (!this.serving) return;
    this.hub.stateServers.delete(this.prefix);
  }

  /**
   * Stops serving and replaces this peer's advertisement with one saying it no longer serves, so
   * peers stop choosing it now rather than when the advertisement expires.
   */
  async withdraw(): Promise<void> {
    this.stop();
    try {
      await this.hub.donors.store(stateKey(this.prefix), '', { epoch: this.provider.epoch(), canServe: false }, Date.now() + 3 * this.opts.advertiseIntervalMs);
    } catch (err) {
      this.log.warn({ prefix: this.prefix, err: (err as Error).message }, 'could not withdraw the state advertisement');
    }
  }

  /**
   * Publishes the current epoch now (call after each epoch change so newcomers find the newest
   * state), with the sha256 of the state served at that epoch once it is known: computed once per
   * epoch in the background once the provider is settled, then advertised again.
   */
  async advertise(): Promise<void> {
    const epoch = this.provider.epoch();
    const sha256 = this.hashed?.epoch === epoch ? this.hashed.sha256 : undefined;
    try {
      await this.hub.donors.store(stateKey(this.prefix), '', { epoch, canServe: true, ...(sha256 ? { sha256 } : {}) }, Date.now() + 3 * this.opts.advertiseIntervalMs);
    } catch (err) {
      this.log.warn({ prefix: this.prefix, err: (err as Error).message }, 'could not advertise state');
    }
    // hashing needs a snapshot: not while it would force a pending step (the next advertisement hashes)
    if (sha256 === undefined && this.hashing === undefined && this.serving && (this.provider.settled?.() ?? true)) {
      this.hashing = this.hash()
        .then((hashed) => {
          this.hashed = hashed;
          if (hashed.epoch === this.provider.epoch() && this.serving) return this.advertise();
        })
        .catch((err: unknown) => this.log.warn({ prefix: this.prefix, err: (err as Error).message }, 'could not hash the state to advertise'))
        .finally(() => (this.hashing = undefined));
    }
  }

  private async hash(): Promise<{ epoch: number; sha256: string }> {
    const snapshot = await this.provider.snapshot();
    return { epoch: snapshot.epoch, sha256: createHash('sha256').update(snapshot.data).digest('hex') };
  }

  private async serve(framed: FramedStream, peer: string, _request: StateRequest): Promise<void> {
    const busy = this.slots.take(peer);
    if (busy !== undefined) {
      // one code on this protocol: a newcomer tries the next donor either way
      await framed.write({ t: 'refused', code: 'BUSY', message: busy.message } satisfies StateHeader, deadline(2000));
      await framed.close(deadline(2000));
      return;
    }
    let reader: MinRateDeadline | undefined;
    try {
      const snapshot = await this.provider.snapshot();
      const metadata = snapshot.metadata ?? {};
      const size = snapshot.data.byteLength;
      const sha256 = createHash('sha256').update(snapshot.data).digest();
      const { chunkBytes, stallTimeoutMs, minReaderBytesPerSecond } = this.opts;
      await framed.write({ t: 'header', epoch: snapshot.epoch, size, sha256, chunkBytes, metadata } satisfies StateHeader, deadline(stallTimeoutMs));
      let at = 0;
      const slow = (reader = this.slots.readerFloor(peer, { reader: framed, stallMs: stallTimeoutMs, bytes: size, minBytesPerSecond: minReaderBytesPerSecond }, { role: 'donor', what: '', taken: () => at }, (why) => new ProtocolError(why)));
      for (; at < size; at += chunkBytes) {
        await slow.guard(framed.write({ t: 'data', d: snapshot.data.subarray(at, at + chunkBytes) }, deadline(stallTimeoutMs, slow.signal)));
      }
      // the last write queue (megabytes) is the reader's to take within the floor too: a close would wait for it under one stall deadline
      await slow.guard(framed.flush(stallTimeoutMs, slow.signal));
      await framed.close(deadline(stallTimeoutMs));
      this.served++;
      this.log.info({ peer, epoch: snapshot.epoch, bytes: snapshot.data.byteLength }, `served state of epoch ${snapshot.epoch} to ${peer}`);
    } catch (err) {
      this.log.warn({ peer, err: (err as Error).message }, 'state download by a peer failed');
      framed.abort(err as Error);
    } finally {
      this.slots.release(peer);
      reader?.release();
    }
  }
}

interface Donor {
  readonly peer: string;
  readonly epoch: number;
  /** The hash its state must have: the one it and its backers advertise (undefined: unbacked, see below). */
  readonly sha256: string | undefined;
}

/**
 * Donors of `prefix` worth trying, newest epoch first; ties in random order so newcomers spread out.
 * An advertisement is only a claim. A state (epoch + sha256) is backed when two peers advertise it,
 * or one `trusted` peer does (the peers of the join code: the run's coordinator):
 * donors of backed states are the only ones tried, each checked against the advertised hash, so one
 * identity can serve nothing nobody else vouches for. A donor alone in the swarm is trusted as it
 * is. When several advertise but no two agree (peers whose last rounds differed), the backed epoch
 * is the second highest advertised, and donors more than one past it are left out, so one peer
 * claiming epoch 10⁹ is never downloaded from, nor followed. A donor this node found not to speak
 * STATE_PROTOCOL (another Cohort release) is left out for the node's life.
 */
async function donors(hub: AveragingHub, self: string, prefix: string, minEpoch: number, trusted: readonly string[]): Promise<{ list: Donor[]; unbacked: string[]; otherRelease: string[] }> {
  const entries = await hub.donors.get(stateKey(prefix));
  const adverts = [...entries.values()].filter((e) => e.owner !== self && e.subkey === '');
  const serving = adverts.filter((e) => e.value.canServe);
  const otherRelease = serving.filter((e) => hub.notices.has(otherReleaseNotice(e.owner))).map((e) => e.owner);
  const all = serving.filter((e) => !otherRelease.includes(e.owner)).map((e) => ({ peer: e.owner, epoch: e.value.epoch, sha256: e.value.sha256, tie: Math.random() }));
  all.sort((a, b) => b.epoch - a.epoch || a.tie - b.tie);
  // a peer that stopped serving still vouches for the state it advertised
  const backers = new Map<string, string[]>();
  for (const e of adverts) {
    const key = `${e.value.epoch}:${e.value.sha256}`;
    if (e.value.sha256 !== undefined) backers.set(key, [...(backers.get(key) ?? []), e.owner]);
  }
  const isBacked = (owners: string[] = []): boolean => owners.length >= 2 || owners.some((o) => trusted.includes(o));
  const backed = all.filter((d) => d.sha256 !== undefined && isBacked(backers.get(`${d.epoch}:${d.sha256}`)) && d.epoch >= minEpoch);
  const describe = (d: (typeof all)[number]): string => `${d.peer} (epoch ${d.epoch}${d.sha256 ? `, sha256 ${d.sha256.slice(0, 12)}…` : ''})`;
  if (backed.length > 0) return { list: backed.map(({ peer, epoch, sha256 }) => ({ peer, epoch, sha256 })), unbacked: all.filter((d) => !backed.includes(d) && d.epoch >= minEpoch).map(describe), otherRelease };
  // a lone donor's hash is only its own word: checked against its header, as any download is
  if (all.length === 1) return { list: all.filter((d) => d.epoch >= minEpoch).map(({ peer, epoch }) => ({ peer, epoch, sha256: undefined })), unbacked: [], otherRelease };
  const limit = (all[1]?.epoch ?? 0) + 1;
  const list = all.filter((d) => d.epoch <= limit && d.epoch >= minEpoch).map(({ peer, epoch }) => ({ peer, epoch, sha256: undefined }));
  return { list, unbacked: all.filter((d) => d.epoch > limit).map(describe), otherRelease };
}

/** The newest epoch any other peer advertises a state of (undefined when none does). */
export async function advertisedStateEpoch(node: SwarmNode, hub: AveragingHub, prefix: string, trusted: readonly string[] = []): Promise<number | undefined> {
  return (await donors(hub, node.peerId.toString(), prefix, 0, trusted)).list[0]?.epoch;
}

/**
 * hivemind's load_state_from_peers: downloads the state of the donor with the highest epoch,
 * falling back to the next donor on any failure (busy, unreachable, stalled, bad checksum).
 */
export async function loadStateFromPeers(node: SwarmNode, hub: AveragingHub, prefix: string, opts: LoadStateOptions, log: Logger): Promise<LoadedState> {
  const started = Date.now();
  const { list: found, unbacked, otherRelease } = await donors(hub, node.peerId.toString(), prefix, opts.minEpoch ?? 0, opts.trusted ?? []);
  if (unbacked.length > 0) log.warn({ unbacked }, `left out ${unbacked.length} state donor(s) advertising a state no other peer backs: ${unbacked.join(', ')}`);
  if (found.length > 1 && found[0]!.sha256 === undefined) log.warn(`no two peers advertise the same state of "${prefix}": trying donors at the second highest epoch advertised or one past it, unchecked against others`);
  if (found.length === 0) throw new StateDownloadError(`no peer advertises state for "${prefix}"${opts.minEpoch ? ` at epoch ≥ ${opts.minEpoch}` : ''} under ${stateKey(prefix)}${unbacked.length > 0 ? ` (left out, unbacked: ${unbacked.join(', ')})` : ''}${otherRelease.length > 0 ? ` (left out, of another Cohort release: ${otherRelease.join(', ')})` : ''}`, []);
  const failed: Array<{ peer: string; error: string }> = [];
  const tried = found.slice(0, opts.maxDonors);
  for (const donor of tried) {
    opts.signal?.throwIfAborted();
    try {
      // the last donor left is given its time: in a swarm of donors under low upload caps it is the only way to get a state
      const state = await download(node, donor.peer, prefix, donor.sha256, donor === tried.at(-1) ? { ...opts, minBytesPerSecond: 0 } : opts);
      // a backed state is the advertised one; otherwise the donor may have stepped once since it advertised, not more
      if (donor.sha256 !== undefined && state.epoch !== donor.epoch) throw new ProtocolError(`sent a state of epoch ${state.epoch} with the sha256 backed for epoch ${donor.epoch}`);
      if (state.epoch > donor.epoch + 1) throw new ProtocolError(`sent a state of epoch ${state.epoch}, but advertised epoch ${donor.epoch}`);
      // debug: the caller says what it did with it (the optimizer's "loaded state of epoch …", the coordinator's checkpoint)
      log.debug({ donor: donor.peer, epoch: state.epoch, bytes: state.data.byteLength }, `downloaded the state of epoch ${state.epoch} from ${donor.peer}`);
      return { ...state, donor: donor.peer, failed, durationMs: Date.now() - started };
    } catch (err) {
      opts.signal?.throwIfAborted();
      const error = (err as Error).name === 'TimeoutError' ? `no progress for ${opts.stallTimeoutMs} ms` : (err as Error).message;
      if ((err as Error).name !== 'UnsupportedProtocolError') log.warn({ donor: donor.peer, error }, 'state download failed; trying the next donor');
      else if (hub.notices.first(otherReleaseNotice(donor.peer), OTHER_RELEASE_NOTICE)) log.warn({ donor: donor.peer, error }, `not loading state from ${donor.peer}, now or later: ${error}`);
      failed.push({ peer: donor.peer, error });
    }
  }
  throw new StateDownloadError(`could not load state for "${prefix}" from ${failed.length} donor(s): ${failed.map((f) => `${f.peer}: ${f.error}`).join('; ')}`, failed);
}

/** The state `donor` serves; with `backed`, its bytes must have that sha256 (hex), whatever its header says. */
async function download(node: SwarmNode, donor: string, prefix: string, backed: string | undefined, opts: LoadStateOptions): Promise<StateSnapshot & { metadata: StateMetadata }> {
  const stall = (): AbortSignal => deadline(opts.stallTimeoutMs, opts.signal);
  const stream = await node.dial(donor, STATE_PROTOCOL, { signal: stall(), allowRelayed: false });
  const framed = new FramedStream(stream, MAX_STATE_CHUNK_BYTES + 1024, `state from ${donor}`);
  let tooSlow: MinRateDeadline | undefined;
  try {
    await framed.write({ t: 'get', prefix } satisfies StateRequest, stall());
    const header = await framed.expect(stateHeaderSchema, stall(), 'the state header');
    if (header.t === 'refused') throw new ProtocolError(`${header.code}: ${header.message}`);
    if (header.size > opts.maxStateBytes) throw new ProtocolError(`state of ${header.size} bytes exceeds the limit of ${opts.maxStateBytes}`);
    if (header.chunkBytes < MIN_STATE_CHUNK_BYTES) throw new ProtocolError(`chunk size ${header.chunkBytes} is below ${MIN_STATE_CHUNK_BYTES}`);
    if (header.sha256.byteLength !== 32) throw new ProtocolError(`checksum has ${header.sha256.byteLength} bytes, not 32`);
    if (backed !== undefined && Buffer.from(header.sha256).toString('hex') !== backed) throw new ProtocolError(`serves a state with sha256 ${Buffer.from(header.sha256).toString('hex').slice(0, 16)}…, not the backed ${backed.slice(0, 16)}… it advertised`);
    if (cborEncode(header.metadata).byteLength > MAX_STATE_METADATA_BYTES) throw new ProtocolError(`metadata exceeds ${MAX_STATE_METADATA_BYTES} bytes`);
    // kept as they arrive and joined at the end: the header's size is only a claim, and allocating it
    // up front let a donor make a newcomer reserve 2 GiB by sending one frame
    const chunks: Uint8Array[] = [];
    const hash = createHash('sha256');
    let at = 0;
    const slow = (tooSlow = minRateDeadline({ stallMs: opts.stallTimeoutMs, bytes: header.size, minBytesPerSecond: opts.minBytesPerSecond }, (allowedMs) =>
      new ProtocolError(`sent ${at} of ${header.size} bytes in ${(allowedMs / 1000).toFixed(0)} s, under the ${opts.minBytesPerSecond} bytes/s a donor must keep`)));
    while (at < header.size) {
      const chunk = await slow.guard(framed.expect(stateDataSchema, AbortSignal.any([stall(), slow.signal]), `state bytes ${at}–${header.size}`), opts.signal);
      const expected = Math.min(header.chunkBytes, header.size - at);
      if (chunk.d.byteLength !== expected) throw new ProtocolError(`chunk at byte ${at} has ${chunk.d.byteLength} bytes, expected ${expected}`);
      chunks.push(chunk.d);
      hash.update(chunk.d);
      at += expected;
    }
    const data = new Uint8Array(header.size);
    let offset = 0;
    for (const chunk of chunks) {
      data.set(chunk, offset);
      offset += chunk.byteLength;
    }
    const digest = hash.digest();
    if (!digest.equals(header.sha256)) throw new ProtocolError(`sha256 mismatch: got ${digest.toString('hex').slice(0, 16)}…, header says ${Buffer.from(header.sha256).toString('hex').slice(0, 16)}…`);
    await framed.close(stall());
    return { epoch: header.epoch, data, metadata: header.metadata };
  } catch (err) {
    framed.abort(err as Error);
    throw err;
  } finally {
    tooSlow?.release();
  }
}
