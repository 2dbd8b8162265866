import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log/logger.js';
import { deadline, FramedStream, releasableDeadline, type MinRateDeadline } from '../averaging/framing.js';
import { ServingSlots } from '../averaging/serving-slots.js';
import { UploadLimit } from '../averaging/upload-limit.js';
import type { DatasetInfo, DatasetStore } from '../data/dataset-store.js';
import { datasetStore } from '../data/store-datasets.js';
import type { Store } from '../store/index.js';
import type { RecordNamespace, SwarmNode } from '../swarm/index.js';
import {
  DEFAULT_FETCH_MIN_BYTES_PER_S,
  MAX_BLOB_CHUNK_BYTES,
  MAX_HOLDING_BYTES,
  MAX_REQUESTS_PER_STREAM,
  MAX_SHARD_REQUEST_BYTES,
  MAX_TRANSFERS_PER_PEER,
  SHARDS_NAMESPACE,
  SHARDS_PROTOCOL,
  STREAM_IDLE_MS,
  encodeBits,
  hasBit,
  holdingSchema,
  manifestSchema,
  shardRequestSchema,
  type BlobHeader,
  type Holding,
  type Manifest,
  type ManifestReply,
  type ShardRequest,
} from './messages.js';
import { readShardOffThread } from './shard-io.js';
import { ShardExchangeError } from './errors.js';

type Refusal = Extract<BlobHeader, { t: 'refused' }>;

const namespaces = new WeakMap<SwarmNode, RecordNamespace<Holding>>();

/** The `shards` record namespace of a node (registered once per node, shared by its server and fetches). */
export function holdingsOf(node: SwarmNode): RecordNamespace<Holding> {
  let ns = namespaces.get(node);
  if (ns === undefined) {
    ns = node.registerNamespace(SHARDS_NAMESPACE, holdingSchema, { maxValueBytes: MAX_HOLDING_BYTES });
    namespaces.set(node, ns);
  }
  return ns;
}

export function holdingKey(datasetId: string): string {
  return `${SHARDS_NAMESPACE}/${datasetId}`;
}

/** How many peers advertise each shard of `datasetId` (by manifest index); empty when nobody does. */
export async function holdersPerShard(node: SwarmNode, datasetId: string): Promise<number[]> {
  const holdings = [...(await holdingsOf(node).get(holdingKey(datasetId))).values()].map((e) => e.value);
  // every honest holder advertises the manifest's shard count; a record of another count is not counted
  const shards = Math.max(0, ...holdings.map((h) => h.shards));
  return Array.from({ length: shards }, (_, i) => holdings.filter((h) => h.shards === shards && hasBit(h.have, i)).length);
}

/** The manifest of a dataset this store holds: the one it was fetched by, or built from its own shards. */
export function manifestOf(info: DatasetInfo, datasets: DatasetStore): Manifest {
  if (info.datasetId === null) throw new RangeError(`dataset ${info.cacheKey} is not complete: it has no identity yet`);
  if (info.manifest !== null) return manifestSchema.parse(JSON.parse(info.manifest));
  return {
    datasetId: info.datasetId,
    maxSeqLen: info.params.maxSeqLen,
    shortSeqProb: info.params.shortSeqProb,
    tokenizerSha256: info.tokenizerHash,
    tokenizerBytes: fs.statSync(info.tokenizerFile).size,
    vocabSize: info.vocabSize,
    shards: datasets.shardEntries(info.cacheKey).map(({ sha256, examples, tokens, bytes }) => ({ sha256, examples, tokens, bytes })),
  };
}

/** While an advert reaches nobody it is retried this often, this many times (then at the advertise interval). */
const ADVERTISE_RETRY_MS = 2000;
const ADVERTISE_RETRIES = 30;

export interface ShardServerOptions {
  /** This node's upload cap for shard traffic, bytes/s (shared by every transfer). @default unlimited */
  readonly uploadBytesPerSecond?: number;
  /**
   * Transfers served at once; more are refused with BUSY so newcomers spread over holders (hivemind
   * #169). One peer gets at most MAX_TRANSFERS_PER_PEER of them, or half of them if that is fewer (at
   * least one); more are refused with PEER_BUSY. @default 4
   */
  readonly maxConcurrentTransfers?: number;
  /**
   * A transfer whose reader keeps it waiting longer than a stall timeout plus its bytes at this rate
   * (backpressure only: time under `uploadBytesPerSecond` does not count) is ended, and the reader
   * refused for SLOW_READER_REFUSED_MS: one taking a chunk just within the stall timeout would hold a
   * slot for ever. The rate a fetcher asks of a holder. @default DEFAULT_FETCH_MIN_BYTES_PER_S
   */
  readonly minReaderBytesPerSecond?: number;
  /** How often the holdings are published again (records expire after 3 intervals). @default 60 s */
  readonly advertiseIntervalMs?: number;
  /** Bytes of recently served shards kept in memory: newcomers ask for the same shards, and a read from the store costs a fresh buffer each time. @default 32 MiB */
  readonly recentBlobBytes?: number;
  /** A transfer making no progress for this long is dropped. @default 30 s */
  readonly stallTimeoutMs?: number;
  /** Bytes per data frame, up to MAX_BLOB_CHUNK_BYTES. @default MAX_BLOB_CHUNK_BYTES, or a quarter second at the upload cap (from 4 KiB) */
  readonly chunkBytes?: number;
}

/**
 * Serves this store's prepared datasets on SHARDS_PROTOCOL: manifests by dataset id, and blobs (shards,
 * tokenizer.json files) by sha256 from any byte offset, and advertises under `shards/<dataset id>`
 * which shards it holds.
 */
export class ShardServer {
  private readonly datasets: DatasetStore;
  private readonly upload: UploadLimit | undefined;
  private readonly slots: ServingSlots;
  private readonly minReaderBytesPerSecond: number;
  private readonly advertiseIntervalMs: number;
  private readonly stallTimeoutMs: number;
  private readonly chunkBytes: number;
  private timer: NodeJS.Timeout | undefined;
  private readonly manifests = new Map<string, Manifest>();
  /** Shards served lately, least recent first, up to `recentBlobBytes` in all (content-addressed: never stale). */
  private readonly recent = new Map<string, Uint8Array>();
  private recentBytes = 0;
  /** Tokenizers asked for whose local file lacks their sha256 (logged once). */
  private readonly unservable = new Set<string>();
  private readonly recentBlobBytes: number;
  private stopped = true;
  /** Adverts in a row that reached nobody. */
  private retries = 0;
  /** Streams opened to this server, transfers completed, bytes sent and requests refused with BUSY or PEER_BUSY, for logs and the benchmark. */
  streams = 0;
  served = 0;
  bytesSent = 0;
  busyRefusals = 0;

  constructor(
    private readonly node: SwarmNode,
    private readonly store: Store,
    private readonly log: Logger,
    options: ShardServerOptions = {},
  ) {
    this.datasets = datasetStore(store);
    this.upload = options.uploadBytesPerSecond === undefined ? undefined : new UploadLimit(options.uploadBytesPerSecond);
    const maxConcurrent = options.maxConcurrentTransfers ?? 4;
    if (!(Number.isInteger(maxConcurrent) && maxConcurrent >= 1)) throw new RangeError(`maxConcurrentTransfers ${maxConcurrent} must be an integer ≥ 1`);
    this.slots = new ServingSlots(maxConcurrent, Math.min(MAX_TRANSFERS_PER_PEER, Math.max(1, Math.floor(maxConcurrent / 2))));
    this.minReaderBytesPerSecond = options.minReaderBytesPerSecond ?? DEFAULT_FETCH_MIN_BYTES_PER_S;
    if (!(this.minReaderBytesPerSecond > 0)) throw new RangeError(`minReaderBytesPerSecond ${this.minReaderBytesPerSecond} must be above 0`);
    this.advertiseIntervalMs = options.advertiseIntervalMs ?? 60_000;
    this.stallTimeoutMs = options.stallTimeoutMs ?? 30_000;
    this.recentBlobBytes = options.recentBlobBytes ?? 32 * 1024 * 1024;
    // under a cap a chunk must come well within the fetcher's stall timeout (DEFAULT_FETCH_STALL_TIMEOUT_MS)
    const capped = options.uploadBytesPerSecond === undefined ? MAX_BLOB_CHUNK_BYTES : Math.min(MAX_BLOB_CHUNK_BYTES, Math.max(4096, Math.floor(options.uploadBytesPerSecond / 4)));
    this.chunkBytes = options.chunkBytes ?? capped;
    if (!(Number.isInteger(this.chunkBytes) && this.chunkBytes >= 1 && this.chunkBytes <= MAX_BLOB_CHUNK_BYTES)) throw new RangeError(`chunkBytes ${this.chunkBytes} must be an integer from 1 to ${MAX_BLOB_CHUNK_BYTES}`);
    holdingsOf(node);
  }

  async start(): Promise<void> {
    await this.node.handle(SHARDS_PROTOCOL, (stream, connection) => {
      const peer = connection.remotePeer.toString();
      const framed = new FramedStream(stream, MAX_SHARD_REQUEST_BYTES, `shard requests from ${peer}`, this.upload);
      this.streams++;
      this.session(framed, peer).catch((err: Error) => {
        this.log.warn({ peer, err: err.message }, 'shard transfer to a peer failed');
        framed.abort(err);
      });
    }, { maxInboundStreams: 32, allowRelayed: false });
    this.stopped = false;
    await this.advertise();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.node.unhandle(SHARDS_PROTOCOL).catch(() => undefined);
  }

  /**
   * Publishes what this store holds now (call after a fetch, or an eviction, so holders are found as
   * they are), then again every advertise interval; every ADVERTISE_RETRY_MS instead while an advert
   * reached nobody (a founder alone, or not yet serving the DHT: newcomers would find no holder).
   */
  async advertise(): Promise<void> {
    clearTimeout(this.timer);
    const ns = holdingsOf(this.node);
    let storedNowhere = false;
    for (const info of this.datasets.list()) {
      if (info.datasetId === null) continue;
      try {
        const manifest = this.manifest(info);
        // a shard's seq is its manifest index (fetched shards are stored by it, prepared ones build the manifest in seq order)
        const held = new Set(this.datasets.shardSeqs(info.cacheKey));
        const have = encodeBits(manifest.shards.map((_, i) => held.has(i)));
        const { replicas } = await ns.store(holdingKey(info.datasetId), '', { shards: manifest.shards.length, have }, Date.now() + 3 * this.advertiseIntervalMs);
        storedNowhere ||= replicas === 0;
      } catch (err) {
        storedNowhere = true;
        this.log.warn({ dataset: info.datasetId, err: (err as Error).message }, 'could not advertise shards');
      }
    }
    if (this.stopped) return;
    this.retries = storedNowhere ? this.retries + 1 : 0;
    const soon = storedNowhere && this.retries <= ADVERTISE_RETRIES;
    this.timer = setTimeout(() => void this.advertise(), soon ? ADVERTISE_RETRY_MS : this.advertiseIntervalMs);
    this.timer.unref();
  }

  /** A stream's requests, answered in turn, until the fetcher closes its side or sends nothing for STREAM_IDLE_MS. */
  private async session(framed: FramedStream, peer: string): Promise<void> {
    for (let n = 0; n < MAX_REQUESTS_PER_STREAM; n++) {
      const request = await framed.read(shardRequestSchema, deadline(STREAM_IDLE_MS));
      if (request === null) break;
      await this.serve(framed, peer, request);
    }
    await framed.close(deadline(this.stallTimeoutMs));
  }

  private async serve(framed: FramedStream, peer: string, request: ShardRequest): Promise<void> {
    // one stall deadline per transfer, pushed back by each chunk that goes out: a timer per chunk would cost more than the chunk's framing
    const stall = releasableDeadline(this.stallTimeoutMs);
    const busy = this.slots.take(peer);
    if (busy !== undefined) {
      this.busyRefusals++;
      await framed.write({ t: 'refused', ...busy } satisfies BlobHeader, stall.signal);
      return stall.release();
    }
    let reader: MinRateDeadline | undefined;
    try {
      if (request.t === 'manifest') {
        const info = this.datasets.byDatasetId(request.datasetId);
        const reply: ManifestReply = info
          ? { t: 'manifest', manifest: this.manifest(info) }
          : { t: 'refused', code: 'NOT_FOUND', message: `no dataset ${request.datasetId} here` };
        return await framed.write(reply, stall.signal);
      }
      const blob = await this.blob(request.sha256);
      if (!(blob instanceof Uint8Array) || request.offset > blob.byteLength) {
        const refusal: BlobHeader = blob instanceof Uint8Array
          ? { t: 'refused', code: 'BAD_OFFSET', message: `offset ${request.offset} is past the end (${blob.byteLength} bytes)` }
          : blob;
        return await framed.write(refusal, stall.signal);
      }
      await framed.write({ t: 'blob', size: blob.byteLength } satisfies BlobHeader, stall.signal);
      const bytes = blob.byteLength - request.offset;
      let at = request.offset;
      reader = this.slots.readerFloor(peer, { reader: framed, stallMs: this.stallTimeoutMs, bytes, minBytesPerSecond: this.minReaderBytesPerSecond }, { role: 'holder', what: ` of ${request.sha256.slice(0, 12)}…`, taken: () => at - request.offset }, (why) => new ShardExchangeError(why));
      const signal = AbortSignal.any([stall.signal, reader.signal]);
      for (let i = 0; at < blob.byteLength; at += this.chunkBytes, i++) {
        const d = blob.subarray(at, at + this.chunkBytes);
        await reader.guard(framed.writeChunk(i, d, signal));
        stall.refresh();
        this.bytesSent += d.byteLength;
      }
      this.served++;
      this.log.debug({ peer, sha256: request.sha256, offset: request.offset, bytes: blob.byteLength - request.offset }, 'served a shard');
    } finally {
      this.slots.release(peer);
      reader?.release();
      stall.release();
    }
  }

  /**
   * A dataset's manifest: a fetched one's as stored (a fetch replaces one found forged), a prepared
   * one's built once per server (building it reads every shard's row).
   */
  private manifest(info: DatasetInfo): Manifest {
    if (info.manifest !== null) return manifestOf(info, this.datasets);
    let manifest = this.manifests.get(info.cacheKey);
    if (manifest === undefined) this.manifests.set(info.cacheKey, (manifest = manifestOf(info, this.datasets)));
    return manifest;
  }

  /**
   * A shard by its sha256 (read off the event loop), or a tokenizer.json of a held dataset whose bytes
   * have that sha256 (its file may have changed since it was prepared or fetched); else the refusal.
   */
  private async blob(sha256: string): Promise<Uint8Array | Refusal> {
    const kept = this.recent.get(sha256);
    if (kept !== undefined) {
      this.recent.delete(sha256);
      this.recent.set(sha256, kept);
      return kept;
    }
    const shard = await readShardOffThread(this.store, sha256);
    if (shard !== undefined) {
      this.keep(sha256, shard);
      return shard;
    }
    const files = this.datasets.list().filter((d) => d.tokenizerHash === sha256).map((d) => d.tokenizerFile);
    if (files.length === 0) return { t: 'refused', code: 'NOT_FOUND', message: `no shard or tokenizer with sha256 ${sha256} here` };
    const tokenizer = this.datasets.localTokenizer(sha256, path.dirname(this.store.file));
    if (tokenizer !== undefined) {
      this.keep(sha256, tokenizer.bytes);
      return tokenizer.bytes;
    }
    // said once per server: every fetcher asks for it
    if (!this.unservable.has(sha256)) {
      this.unservable.add(sha256);
      this.log.warn({ sha256, files }, `not serving the tokenizer with sha256 ${sha256}: ${files.join(', ')} is missing, unreadable or altered on disk (restore it, or prepare the dataset again)`);
    }
    return { t: 'refused', code: 'NOT_FOUND', message: `this holder's tokenizer with sha256 ${sha256} is missing or altered on disk` };
  }

  private keep(sha256: string, shard: Uint8Array): void {
    if (shard.byteLength > this.recentBlobBytes) return;
    this.recent.set(sha256, shard);
    this.recentBytes += shard.byteLength;
    for (const [oldest, blob] of this.recent) {
      if (this.recentBytes <= this.recentBlobBytes) break;
      this.recent.delete(oldest);
      this.recentBytes -= blob.byteLength;
    }
  }
}

const shared = new WeakMap<SwarmNode, { readonly server: ShardServer; readonly ready: Promise<void>; users: number }>();

/** A use of a node's shared ShardServer: `ready` once it serves; `release` stops it when no other use remains. */
export interface ShardServing {
  readonly ready: Promise<void>;
  /** Publishes what the store holds now (after a fetch or a drop). */
  advertise(): Promise<void>;
  release(): Promise<void>;
}

/**
 * The node's one ShardServer, shared by whoever needs it (in the app, training and the coordinator
 * switch run on one node, and a protocol has one handler): the first use starts it, the last stops it.
 */
export function serveShards(node: SwarmNode, store: Store, log: Logger): ShardServing {
  let entry = shared.get(node);
  if (entry === undefined) {
    const server = new ShardServer(node, store, log);
    const created = { server, ready: server.start(), users: 0 };
    // a failed start is not kept: the next use tries again
    created.ready.catch(() => shared.get(node) === created && shared.delete(node));
    shared.set(node, created);
    entry = created;
  }
  const use = entry;
  use.users++;
  let released = false;
  return {
    ready: use.ready,
    advertise: () => use.server.advertise(),
    async release() {
      if (released) return;
      released = true;
      if (--use.users > 0) return;
      if (shared.get(node) === use) shared.delete(node);
      await use.ready.catch(() => undefined);
      await use.server.stop();
    },
  };
}
