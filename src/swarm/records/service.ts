import type { Connection, Libp2p, PeerId, PrivateKey, Stream } from '@libp2p/interface';
import type { z } from 'zod';
import type { Logger } from '../../log/logger.js';
import {
  CLOSEST_SERVERS_CACHE_ENTRIES,
  CLOSEST_SERVERS_CACHE_MS,
  DEFAULT_REPLICATION,
  EVICTION_INTERVAL_MS,
  MAX_KEY_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_SUBKEY_BYTES,
  RECORDS_RATE_LIMIT,
  RECORDS_REQUEST_TIMEOUT_MS,
} from '../constants.js';
import { RecordError, type RejectReason } from '../errors.js';
import { recordsProtocol } from '../protocols.js';
import { answerOnce, requestOnce } from '../streams.js';
import { admitEntry } from './admit.js';
import { ClosestServersCache } from './closest-cache.js';
import { entryName, entrySize, signEntry, VerifiedSignatures, type VerifiedEntry, type WireEntry } from './entry.js';
import { decodeMessage, encodeMessage, recordsRequestSchema, recordsResponseSchema, type RecordsRequest, type RecordsResponse } from './messages.js';
import { NamespaceRegistry, decodeValue, encodeValue, namespaceTtlMs } from './namespaces.js';
import { PeerRateLimiter } from './rate-limit.js';
import { RecordTable } from './table.js';

/** One entry of a key's merged dictionary, as `get` returns it. */
export interface RecordEntry<T> {
  readonly value: T;
  /** ms since the Unix epoch */
  readonly expiration: number;
  /** peer id of the signer, who alone can write this entry */
  readonly owner: string;
  readonly subkey: string;
}

export interface StoreResult {
  /** Peers now holding the entry (this peer included when it is a DHT server). 0: nobody holds it. */
  readonly replicas: number;
  /** Peers that refused it, with their reason (e.g. `not-newer`, or an unreachable peer's error). */
  readonly refused: ReadonlyArray<{ readonly peer: string; readonly reason: string }>;
}

/** A namespace's typed view of the records. */
export interface RecordNamespace<T> {
  readonly name: string;
  store(key: string, subkey: string, value: T, expirationMs: number): Promise<StoreResult>;
  get(key: string, options?: GetOptions): Promise<Map<string, RecordEntry<T>>>;
}

export interface GetOptions {
  /**
   * Called with each value a server returned that the namespace's schema refuses (its signature is
   * not checked: such an entry is dropped before), and the schema's complaint: a reader may name
   * what it cannot read, such as a record of another version.
   */
  readonly unreadable?: (value: unknown, detail: string) => void;
}

export interface RecordsStats {
  readonly keys: number;
  readonly entries: number;
  readonly bytes: number;
  readonly storeRequestsServed: number;
  readonly getRequestsServed: number;
  /** Entries or requests refused, by reason (from other peers, and invalid entries found by gets). */
  readonly rejected: Partial<Record<RejectReason, number>>;
  /**
   * How this peer's stores and gets found a key's closest servers: `walked`, a DHT lookup; `cached`,
   * the servers a lookup found within the last CLOSEST_SERVERS_CACHE_MS; `stale`, cached servers
   * that were disconnected or did not answer (the lookup was then done, and counted in `walked`).
   */
  readonly lookups: { readonly walked: number; readonly cached: number; readonly stale: number };
}

type Answered = { readonly peer: PeerId; readonly answer: PromiseSettledResult<RecordsResponse> };

export interface RecordsComponents {
  readonly runId: string;
  readonly privateKey: PrivateKey;
  readonly peerId: PeerId;
  /** DHT server at start: holds records for others and answers requests. Client-mode peers only ask. See `setServing`. */
  readonly serve: boolean;
  readonly libp2p: Pick<Libp2p, 'dialProtocol' | 'handle' | 'unhandle' | 'getConnections'>;
  /** DHT servers closest to the key, nearest first (this peer excluded). */
  closestPeers(key: Uint8Array, count: number): Promise<PeerId[]>;
  readonly log: Logger;
  readonly replication?: number;
  readonly now?: () => number;
}

/**
 * hivemind-style DHT records over a Cohort request/response protocol: the kad-dht routing table
 * finds the servers closest to a key, `store` sends the signed entry to the `replication` closest,
 * `get` asks twice as many and merges what they hold. Every entry is checked on receipt, both by
 * the peer that holds it and by the peer that reads it.
 */
export class DhtRecords {
  readonly namespaces = new NamespaceRegistry();
  private readonly table = new RecordTable();
  private readonly signatures = new VerifiedSignatures();
  private readonly limiter = new PeerRateLimiter(RECORDS_RATE_LIMIT.points, RECORDS_RATE_LIMIT.points / RECORDS_RATE_LIMIT.durationSeconds);
  private readonly rejected: Partial<Record<RejectReason, number>> = {};
  private served = { store: 0, get: 0 };
  private readonly lookups = { walked: 0, cached: 0, stale: 0 };
  private readonly closest: ClosestServersCache;
  private evictTimer: NodeJS.Timeout | undefined;
  private readonly protocol: string;
  private readonly replication: number;
  private readonly now: () => number;
  private serving = false;

  constructor(private readonly c: RecordsComponents) {
    this.protocol = recordsProtocol(c.runId);
    this.replication = c.replication ?? DEFAULT_REPLICATION;
    this.now = c.now ?? Date.now;
    this.closest = new ClosestServersCache(CLOSEST_SERVERS_CACHE_MS, CLOSEST_SERVERS_CACHE_ENTRIES, this.now);
  }

  async start(): Promise<void> {
    await this.setServing(this.c.serve);
    this.evictTimer = setInterval(() => this.table.evictExpired(this.now()), EVICTION_INTERVAL_MS);
    this.evictTimer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.evictTimer);
    this.closest.clear();
    await this.setServing(false);
  }

  /**
   * Starts or stops serving the records protocol (a node whose reachability changed). A node that
   * stops serving drops what it held for others: the other replicas still have it.
   */
  async setServing(on: boolean): Promise<void> {
    if (on === this.serving) return;
    this.serving = on;
    if (on) {
      await this.c.libp2p.handle(this.protocol, (stream, connection) => this.onStream(stream, connection), { maxInboundStreams: 64 });
    } else {
      await this.c.libp2p.unhandle(this.protocol);
      this.table.clear();
    }
  }

  /** Registers a key namespace and its value schema; returns its typed store/get. */
  namespace<T>(name: string, schema: z.ZodType<T>, options: { maxValueBytes?: number } = {}): RecordNamespace<T> {
    this.namespaces.register(name, schema, options);
    return {
      name,
      store: (key, subkey, value, expirationMs) => this.store(key, subkey, value, expirationMs),
      get: (key, options) => this.get(key, options) as Promise<Map<string, RecordEntry<T>>>,
    };
  }

  /** Signs and stores this peer's entry (key, subkey) until `expirationMs` (ms since the epoch). */
  async store(key: string, subkey: string, value: unknown, expirationMs: number): Promise<StoreResult> {
    const wire = await this.signLocal(key, subkey, value, expirationMs);
    const refused: Array<{ peer: string; reason: string }> = [];
    let replicas = 0;
    if (this.serving) {
      const outcome = this.table.put({ wire, owner: this.c.peerId.toString(), size: entrySize(wire) }, this.now());
      if (outcome === 'stored') replicas++;
      else refused.push({ peer: this.c.peerId.toString(), reason: outcome });
    }
    for (const { peer: id, answer } of await this.requestClosest(key, this.replication, { t: 'store', e: [wire] })) {
      const peer = id.toString();
      if (answer.status === 'rejected') refused.push({ peer, reason: `unreachable: ${(answer.reason as Error).message}` });
      else if (answer.value.t === 'stored' && answer.value.r[0] === null) replicas++;
      else refused.push({ peer, reason: answer.value.t === 'stored' ? String(answer.value.r[0]) : answer.value.t === 'refused' ? answer.value.reason : 'unexpected answer' });
    }
    if (replicas === 0) this.c.log.debug({ key, subkey, refused }, 'record stored nowhere');
    return { replicas, refused };
  }

  /** The merged dictionary of unexpired entries under `key`: entry name (owner[/subkey]) → entry. */
  async get(key: string, options: GetOptions = {}): Promise<Map<string, RecordEntry<unknown>>> {
    const spec = this.namespaces.lookup(key);
    if (spec === undefined) throw new RecordError('unknown-namespace', `records.get("${key}"): no namespace registered for "${key.split('/')[0]}"`);
    const now = this.now();
    const merged = new Map<string, VerifiedEntry>();
    const keep = (entry: VerifiedEntry): void => {
      const name = entryName(entry.owner, entry.wire.s);
      const held = merged.get(name);
      if (held === undefined || entry.wire.e > held.wire.e) merged.set(name, entry);
    };
    if (this.serving) this.table.get(key, now).forEach(keep);
    const answers = await this.requestClosest(key, 2 * this.replication, { t: 'get', k: key });
    // which servers a read asked and what each said: a peer that sees too few others reads this
    if (this.c.log.isLevelEnabled('debug')) this.c.log.debug({ key, serving: this.serving, ms: this.now() - now, answers: answers.map(describeAnswer) }, 'records get');
    for (const { answer } of answers) {
      if (answer.status === 'rejected' || answer.value.t !== 'found') continue;
      for (const raw of answer.value.e) {
        const admitted = await admitEntry(this.c.runId, raw, this.namespaces, this.signatures, now, true);
        // A peer answering with entries of another key is as wrong as a bad signature.
        if (admitted.ok && admitted.entry.wire.k !== key) this.count('malformed');
        else if (!admitted.ok) {
          this.count(admitted.reason);
          if (admitted.reason === 'schema') options.unreadable?.(admitted.value, admitted.detail);
        } else if (admitted.entry.wire.e > now) keep(admitted.entry);
      }
    }
    const out = new Map<string, RecordEntry<unknown>>();
    for (const [name, entry] of merged) {
      const decoded = decodeValue(spec, entry.wire.v);
      if (!decoded.ok) {
        this.count(decoded.reason);
        continue;
      }
      out.set(name, { value: decoded.value, expiration: entry.wire.e, owner: entry.owner, subkey: entry.wire.s });
    }
    return out;
  }

  stats(): RecordsStats {
    return { ...this.table.stats(), storeRequestsServed: this.served.store, getRequestsServed: this.served.get, rejected: { ...this.rejected }, lookups: { ...this.lookups } };
  }

  private async signLocal(key: string, subkey: string, value: unknown, expirationMs: number): Promise<WireEntry> {
    const spec = this.namespaces.lookup(key);
    if (spec === undefined) throw new RecordError('unknown-namespace', `records.store("${key}"): no namespace registered for "${key.split('/')[0]}"`);
    if (key.length === 0 || Buffer.byteLength(key) > MAX_KEY_BYTES) throw new RecordError('key-too-long', `records.store: key must be 1–${MAX_KEY_BYTES} bytes (got ${Buffer.byteLength(key)})`);
    if (Buffer.byteLength(subkey) > MAX_SUBKEY_BYTES) throw new RecordError('subkey-too-long', `records.store("${key}"): subkey is ${Buffer.byteLength(subkey)} bytes; at most ${MAX_SUBKEY_BYTES}`);
    const now = this.now();
    if (!Number.isFinite(expirationMs) || expirationMs <= now) throw new RecordError('expired', `records.store("${key}"): expiration ${expirationMs} is not in the future (now ${now})`);
    const ttl = namespaceTtlMs(key) ?? 0;
    if (expirationMs > now + ttl) throw new RecordError('ttl-too-long', `records.store("${key}"): expiration is ${expirationMs - now} ms away; the namespace allows at most ${ttl} ms`);
    const parsed = spec.schema.safeParse(value);
    if (!parsed.success) throw new RecordError('schema', `records.store("${key}"): value does not match the namespace schema: ${parsed.error.issues[0]?.message ?? 'mismatch'}`);
    const bytes = encodeValue(parsed.data);
    if (bytes.length > spec.maxValueBytes) throw new RecordError('value-too-large', `records.store("${key}"): value is ${bytes.length} bytes encoded; the namespace allows ${spec.maxValueBytes}`);
    return signEntry(this.c.privateKey, this.c.runId, key, subkey, bytes, Math.round(expirationMs));
  }

  /**
   * Sends `message` to the `count` DHT servers closest to `key` and settles every answer. The servers
   * are those a lookup found within CLOSEST_SERVERS_CACHE_MS when each is still connected; if one of
   * them then fails or refuses the request, the entry is dropped, the lookup is done now, and the
   * servers it finds that were not asked yet are asked too: a cached round never ends with fewer
   * answers than a lookup's round would have had.
   */
  private async requestClosest(key: string, count: number, message: RecordsRequest): Promise<Answered[]> {
    const ask = async (peers: readonly PeerId[]): Promise<Answered[]> => (await Promise.allSettled(peers.map((peer) => this.request(peer, message)))).map((answer, i) => ({ peer: peers[i]!, answer }));
    const cached = this.closest.get(key, count);
    let asked: Answered[] = [];
    if (cached !== undefined) {
      // a server that left has no connection: asking it would only wait out the dial
      if (cached.every((peer) => this.c.libp2p.getConnections(peer).length > 0)) {
        this.lookups.cached++;
        asked = await ask(cached);
        if (asked.every(answeredWell)) return asked;
      }
      this.lookups.stale++;
      this.closest.delete(key);
      this.c.log.debug({ key }, 'cached closest servers of the key did not all answer: looking them up again');
    }
    const found = await this.targets(key, count);
    const failed = asked.filter((a) => !answeredWell(a));
    // Not kept: fewer than asked for (a swarm that small, or a routing table still filling, changes
    // too fast), or a server that just failed still among them (the next cached round would fail too).
    if (found.length === count && !found.some((peer) => failed.some((a) => a.peer.equals(peer)))) this.closest.set(key, found);
    return [...asked, ...(await ask(found.filter((peer) => !asked.some((a) => a.peer.equals(peer)))))];
  }

  private async targets(key: string, count: number): Promise<PeerId[]> {
    this.lookups.walked++;
    try {
      return await this.c.closestPeers(new TextEncoder().encode(`${this.protocol}/${key}`), count);
    } catch (err) {
      this.c.log.debug({ key, err: (err as Error).message }, 'no peers found for key');
      return [];
    }
  }

  private async request(peer: PeerId, message: RecordsRequest): Promise<RecordsResponse> {
    const signal = AbortSignal.timeout(RECORDS_REQUEST_TIMEOUT_MS);
    return requestOnce(this.c.libp2p, peer, this.protocol, encodeMessage(message), (bytes) => decodeMessage(recordsResponseSchema, bytes, `records answer from ${peer.toString()}`), { maxBytes: MAX_MESSAGE_BYTES, signal });
  }

  private async onStream(stream: Stream, connection: Connection): Promise<void> {
    const signal = AbortSignal.timeout(RECORDS_REQUEST_TIMEOUT_MS);
    const remote = connection.remotePeer.toString();
    try {
      await answerOnce(stream, async (bytes) => encodeMessage(await this.reply(bytes, connection)), { maxBytes: MAX_MESSAGE_BYTES, signal });
    } catch (err) {
      // Oversized frames and timeouts end here: the sender gets a reset stream.
      this.count('malformed');
      this.c.log.debug({ peer: remote, err: (err as Error).message }, 'records stream failed');
      stream.abort(err as Error);
    }
  }

  /** The answer to a request's bytes from `connection`'s peer: a refusal when it is over its rate or malformed. */
  private async reply(bytes: Uint8Array, connection: Connection): Promise<RecordsResponse> {
    const remote = connection.remotePeer.toString();
    if (!this.limiter.take(remote)) {
      this.count('rate-limited');
      return { t: 'refused', reason: 'rate-limited' };
    }
    let request: RecordsRequest;
    try {
      request = decodeMessage(recordsRequestSchema, bytes, `records request from ${remote}`);
    } catch (err) {
      this.count('malformed');
      this.c.log.debug({ peer: remote, err: (err as Error).message }, 'malformed records request');
      return { t: 'refused', reason: 'malformed' };
    }
    return this.answer(request, sourceOf(connection));
  }

  private async answer(request: RecordsRequest, source: string): Promise<RecordsResponse> {
    const now = this.now();
    if (request.t === 'get') {
      this.served.get++;
      return { t: 'found', e: this.table.answer(request.k, now).map((x) => x.wire) };
    }
    this.served.store++;
    const results: Array<string | null> = [];
    for (const raw of request.e) {
      const admitted = await admitEntry(this.c.runId, raw, this.namespaces, this.signatures, now, false);
      const outcome = admitted.ok ? this.table.put(admitted.entry, now, source) : admitted.reason;
      // not-newer is an ordinary race between replicas, not misbehaviour
      if (outcome !== 'stored' && outcome !== 'not-newer') this.count(outcome);
      results.push(outcome === 'stored' ? null : outcome);
    }
    return { t: 'stored', r: results };
  }

  private count(reason: RejectReason): void {
    this.rejected[reason] = (this.rejected[reason] ?? 0) + 1;
  }
}

function describeAnswer({ peer, answer }: Answered): string {
  const who = peer.toString().slice(-8);
  if (answer.status === 'rejected') return `${who}: ${(answer.reason as Error).message}`;
  return `${who}: ${answer.value.t === 'found' ? `${answer.value.e.length} entries` : answer.value.t}`;
}

/** The server answered the request (a `stored` answer may still refuse the entry, e.g. `not-newer`). */
function answeredWell({ answer }: Answered): boolean {
  return answer.status === 'fulfilled' && answer.value.t !== 'refused';
}

/**
 * The address a holder charges a request's entries to: the remote IP of a direct connection (many
 * identities on one machine share it), the remote peer id behind a relay (the relay's IP is shared
 * by everyone it relays).
 */
function sourceOf(connection: Pick<Connection, 'remoteAddr' | 'remotePeer'>): string {
  const components = connection.remoteAddr.getComponents();
  const ip = components[0];
  const relayed = components.some((c) => c.name === 'p2p-circuit');
  return !relayed && ip !== undefined && (ip.name === 'ip4' || ip.name === 'ip6') && ip.value !== undefined ? `ip:${ip.value}` : `peer:${connection.remotePeer.toString()}`;
}
