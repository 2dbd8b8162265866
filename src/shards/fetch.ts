import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Uint8ArrayList } from 'uint8arraylist';
import { deadline, FramedStream, minRateDeadline, releasableDeadline } from '../averaging/framing.js';
import { datasetIdOf } from '../store/dataset-id.js';
import type { DatasetInfo } from '../data/dataset-store.js';
import { datasetStore } from '../data/store-datasets.js';
import { Prng } from '../data/prng.js';
import { shardHeader } from '../data/shard-format.js';
import { keepTokenizerFile, loadTokenizer } from '../data/tokenizer.js';
import type { Logger } from '../log/logger.js';
import type { DataFetchProgress } from '../shared/api.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import { OTHER_RELEASE_NOTICE } from '../util/notices.js';
import { ShardExchangeError } from './errors.js';
import {
  DEFAULT_FETCH_MIN_BYTES_PER_S,
  DEFAULT_FETCH_STALL_TIMEOUT_MS,
  DEFAULT_WAIT_FOR_HOLDER_MS,
  MAX_BLOB_CHUNK_BYTES,
  MAX_SHARD_FRAME_BYTES,
  MAX_TRANSFERS_PER_PEER,
  SHARDS_PROTOCOL,
  STREAM_IDLE_MS,
  acceptedBlobBytes,
  blobDataSchema,
  blobHeaderSchema,
  hasBit,
  manifestReplySchema,
  type Manifest,
} from './messages.js';
import { holdingKey, holdingsOf } from './server.js';
import { putShardOffThread } from './shard-io.js';

/** What the dashboard shows of a fetch (bytes: the shards', tokenizer excluded). */
export type FetchProgress = DataFetchProgress;

export interface FetchOptions {
  /** The dataset the run names. */
  readonly datasetId: string;
  /** Where a fetched tokenizer.json is written (`<dataDir>/data/tokenizers/<sha256>.json`). */
  readonly dataDir: string;
  /** Manifest indices to hold; default: a random subset (seeded by this peer's id) that fits `quotaBytes`. */
  readonly shards?: readonly number[];
  /**
   * Bytes of this dataset's shards to hold in all (those held already count): without `shards`, the
   * shards to fetch are chosen to fit it; with or without, a verified shard that would overflow it (its
   * manifest understated it) is not stored. @default all of them
   */
  readonly quotaBytes?: number;
  /** Shards in flight at once (each from one holder, at most MAX_TRANSFERS_PER_PEER at one). @default 4 */
  readonly maxParallel?: number;
  /** A holder that sends nothing for this long is left for another. @default DEFAULT_FETCH_STALL_TIMEOUT_MS (15 s) */
  readonly stallTimeoutMs?: number;
  /**
   * A transfer slower than this on average (after a stall timeout's grace) is left, continued at
   * another holder from the same byte offset, and its holder asked only when no other has the blob:
   * a holder sending a byte every few seconds never stalls, but would hold a shard for ever. @default DEFAULT_FETCH_MIN_BYTES_PER_S (16 KiB/s)
   */
  readonly minBytesPerSecond?: number;
  /** When no holder is left for a shard, how long to wait for one to (re)appear in the DHT before giving up. @default DEFAULT_WAIT_FOR_HOLDER_MS (60 s) */
  readonly waitForHolderMs?: number;
  readonly signal?: AbortSignal;
  readonly onProgress?: (p: FetchProgress) => void;
  readonly log: Logger;
}

export interface FetchResult {
  readonly info: DatasetInfo;
  readonly manifest: Manifest;
  readonly tokenizerFile: string;
  /** Shards received and stored now, and shards this store held before. */
  readonly fetched: number;
  readonly alreadyHeld: number;
  readonly bytes: number;
  /** Holders skipped for the rest of the fetch because they served bytes that did not match. */
  readonly penalised: ReadonlyArray<{ readonly peer: string; readonly reason: string }>;
  /** Transfers continued from a byte offset after a holder failed mid-shard. */
  readonly resumed: number;
  readonly durationMs: number;
}

type Holders = Map<string, Uint8Array>;
const HOLDERS_TTL_MS = 5000;
/**
 * A blob's buffer is allocated up front at most this large, whatever its manifest claims (a claim is not
 * covered by the dataset id); a larger blob's grows as its bytes arrive.
 */
const FIRST_BUFFER_MAX_BYTES = 8 * MAX_BLOB_CHUNK_BYTES;

/**
 * Gets a dataset the run names from the swarm: its manifest (checked against the dataset id), its
 * tokenizer.json and the chosen shards, each from any holder that advertises it, verified by sha256
 * and stored in the shard cache. A holder that serves wrong bytes is skipped for the rest of the
 * fetch; a holder that stalls or goes away mid-shard is left and the shard continues from the same
 * byte offset at another one (or, when none is left, at the first to reappear). Shards already held
 * are kept, so calling it again (after a restart, or with a larger quota) fetches only what is missing.
 */
export async function fetchDataset(node: SwarmNode, store: Store, options: FetchOptions): Promise<FetchResult> {
  const streams = new HolderStreams();
  try {
    return await fetchOver(streams, node, store, options);
  } finally {
    await streams.close(deadline(options.stallTimeoutMs ?? DEFAULT_FETCH_STALL_TIMEOUT_MS));
  }
}

async function fetchOver(streams: HolderStreams, node: SwarmNode, store: Store, options: FetchOptions): Promise<FetchResult> {
  const started = Date.now();
  const self = node.peerId.toString();
  const { datasetId, log } = options;
  const stallMs = options.stallTimeoutMs ?? DEFAULT_FETCH_STALL_TIMEOUT_MS;
  const minRate = options.minBytesPerSecond ?? DEFAULT_FETCH_MIN_BYTES_PER_S;
  const waitForHolderMs = options.waitForHolderMs ?? DEFAULT_WAIT_FOR_HOLDER_MS;
  /** Holders that fell below minRate: asked for a blob only when no other holder has it. */
  const slow = new Set<string>();
  const penalised = new Map<string, string>();
  const datasets = datasetStore(store);
  const ns = holdingsOf(node);

  // A DHT get per shard would cost more than moving a 2 MB shard on a LAN: the holders are read again
  // after HOLDERS_TTL_MS, or at once when none of the known ones can serve.
  let known: { at: number; holders: Holders } | undefined;
  const findHolders = async (fresh = false): Promise<Holders> => {
    if (fresh || known === undefined || Date.now() - known.at > HOLDERS_TTL_MS) {
      const entries = await ns.get(holdingKey(datasetId));
      known = { at: Date.now(), holders: new Map([...entries.values()].filter((e) => e.owner !== self).map((e) => [e.owner, e.value.have])) };
    }
    return new Map([...known.holders].filter(([peer]) => !penalised.has(peer)));
  };
  // Blob buffers the store's worker hands back once it stored their shard, reused for the next ones:
  // writing into fresh memory costs a page fault per 4 KiB, more than the copy itself.
  const parallel = options.maxParallel ?? 4;
  const spare: ArrayBuffer[] = [];
  const bufferFor = (claimed: number): ArrayBuffer => {
    const size = Math.min(claimed, FIRST_BUFFER_MAX_BYTES);
    const fits = spare.filter((b) => b.byteLength >= size).sort((a, b) => a.byteLength - b.byteLength)[0];
    if (fits === undefined) return new ArrayBuffer(size);
    spare.splice(spare.indexOf(fits), 1);
    return fits;
  };
  const release = (buffer: ArrayBuffer): void => {
    spare.push(buffer);
    if (spare.length > parallel) spare.sort((a, b) => b.byteLength - a.byteLength).pop();
  };
  /** Transfers of this fetch in progress, per holder. */
  const inFlight = new Map<string, number>();
  /** Per-peer shares holders showed lower than MAX_TRANSFERS_PER_PEER (PEER_BUSY with fewer of this fetch's transfers there), until a transfer there succeeds. */
  const peerCaps = new Map<string, number>();
  const capOf = (peer: string) => peerCaps.get(peer) ?? MAX_TRANSFERS_PER_PEER;
  /** Resolves once one of this fetch's transfers ended (a holder's per-peer slot may be free), or after `ms`. */
  const transferEnds = new EventTarget();
  const transferEnded = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        transferEnds.removeEventListener('ended', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      transferEnds.addEventListener('ended', done);
    });
  const penalise = (peer: string, reason: string) => {
    penalised.set(peer, reason);
    log.warn({ peer, dataset: datasetId, reason }, `skipping shard holder ${peer} for this fetch: ${reason}`);
  };
  /** Runs one request on a stream to `peer` (an idle one of this fetch's, or a new one); the stream is kept for the next request only if it succeeds. */
  const call = async <T>(peer: string, body: (framed: FramedStream, stall: () => AbortSignal) => Promise<T>): Promise<T> => {
    const stall = () => deadline(stallMs, options.signal);
    const framed =
      streams.take(peer) ??
      new FramedStream(
        await node.dial(peer, SHARDS_PROTOCOL, { signal: stall(), allowRelayed: false }).catch((err: Error) => {
          // a holder of another release never will speak this version: not asked again in this fetch (it was dialed every second)
          if (err.name === 'UnsupportedProtocolError') {
            penalise(peer, err.message);
            node.notices.first(`shards ${peer} ${SHARDS_PROTOCOL}`, OTHER_RELEASE_NOTICE);
          }
          throw err;
        }),
        MAX_SHARD_FRAME_BYTES,
        `shards from ${peer}`,
      );
    try {
      const result = await body(framed, stall);
      streams.put(peer, framed);
      return result;
    } catch (err) {
      framed.abort(err as Error);
      throw err;
    }
  };

  /**
   * Streams blob `sha256` from `peer` starting at `have.bytes`; returns when complete or throws (what
   * arrived stays in `have`). The holder's stated size is taken within acceptedBlobBytes of the
   * manifest's `claimed` one: neither is verified before the sha256 is.
   */
  const getBlob = (peer: string, sha256: string, have: Received, claimed: number, onBytes: (n: number) => void) =>
    call(peer, async (framed, stall) => {
      let at = have.bytes;
      await framed.write({ t: 'get', sha256, offset: at }, stall());
      const header = await framed.expect(blobHeaderSchema, stall(), 'the blob header');
      if (header.t === 'refused') {
        const message = `${peer} refused ${sha256.slice(0, 12)}…: ${header.code}: ${header.message}`;
        throw header.code === 'PEER_BUSY' ? new PeerBusyError(message) : new ShardExchangeError(message);
      }
      if (header.size > acceptedBlobBytes(claimed) || header.size < at) throw new ShardExchangeError(`${peer} says ${sha256.slice(0, 12)}… has ${header.size} bytes, the manifest ${claimed} (taken: ${at} to ${acceptedBlobBytes(claimed)})`);
      // one stall timer for the transfer, pushed back by every chunk (a timer per chunk costs more than its framing)
      const stalled = releasableDeadline(stallMs, options.signal);
      const from = at;
      // the bytes the manifest claims, not a stated size beyond it: a holder stating 64 MiB more would be waited for an hour
      const tooSlow = minRateDeadline({ stallMs, bytes: Math.max(0, Math.min(header.size, claimed) - from), minBytesPerSecond: minRate }, (allowedMs) =>
        new SlowHolderError(`${peer} sent ${at - from} of ${header.size - from} bytes of ${sha256.slice(0, 12)}… in ${(allowedMs / 1000).toFixed(0)} s, under the ${minRate} bytes/s a holder must keep`));
      const signal = AbortSignal.any([stalled.signal, tooSlow.signal]);
      try {
        for (let n = 0; at < header.size; n++) {
          const { i, d } = await tooSlow.guard(framed.expectChunk(blobDataSchema, signal, `bytes ${at}–${header.size} of ${sha256.slice(0, 12)}…`), options.signal);
          stalled.refresh();
          if (i !== n) throw new ShardExchangeError(`${peer} sent chunk ${i} of ${sha256.slice(0, 12)}… where chunk ${n} was due`);
          if (d.byteLength === 0 || d.byteLength > MAX_BLOB_CHUNK_BYTES || at + d.byteLength > header.size) throw new ShardExchangeError(`${peer} sent a chunk of ${d.byteLength} bytes at ${at} of ${header.size}`);
          have.push(d, header.size);
          at += d.byteLength;
          onBytes(d.byteLength);
        }
      } finally {
        stalled.release();
        tooSlow.release();
      }
    });

  /**
   * One blob from whichever holder has it: resumes at the byte offset after a failure, verifies the
   * sha256 at the end (a mismatch penalises every holder that contributed), waits for holders to
   * reappear when all have failed, up to `waitForHolderMs`.
   */
  const fetchBlob = async (what: string, sha256: string, claimed: number, holds: (have: Uint8Array) => boolean, onBytes: (n: number) => void): Promise<{ data: Buffer; resumed: number }> => {
    const have = new Received(bufferFor(claimed));
    let contributors = new Set<string>();
    const failedHere = new Set<string>();
    /** Why each holder tried did not deliver this blob (for the error when none is left). */
    const tried = new Map<string, string>();
    let resumed = 0;
    let waitUntil: number | undefined;
    for (;;) {
      options.signal?.throwIfAborted();
      const usable = (holders: Holders) => [...holders].filter(([peer, bits]) => holds(bits) && !failedHere.has(peer)).map(([peer]) => peer);
      let candidates = usable(await findHolders());
      if (candidates.length === 0) candidates = usable(await findHolders(true));
      if (candidates.length === 0) {
        waitUntil ??= Date.now() + waitForHolderMs;
        if (Date.now() > waitUntil) throw new ShardExchangeError(`no holder left for ${what} (sha256 ${sha256.slice(0, 12)}…) of dataset ${datasetId} after waiting ${Math.round(waitForHolderMs / 1000)} s for one: ${describeTried(tried, penalised)}`);
        failedHere.clear(); // a holder that failed may have come back (restart, busy no more)
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
      // the least busy holder (ties at random): parallel shards go to different holders when there are several
      const load = (peer: string) => inFlight.get(peer) ?? 0;
      const fast = candidates.filter((peer) => !slow.has(peer));
      if (fast.length > 0) candidates = fast;
      // a holder serves one peer MAX_TRANSFERS_PER_PEER at once: at its share, this blob waits for one of them to end
      candidates = candidates.filter((peer) => load(peer) < capOf(peer));
      if (candidates.length === 0) {
        await transferEnded(1000);
        continue;
      }
      const least = Math.min(...candidates.map(load));
      const idle = candidates.filter((peer) => load(peer) === least);
      const peer = idle[Math.floor(Math.random() * idle.length)]!;
      const before = have.bytes;
      inFlight.set(peer, load(peer) + 1);
      try {
        await getBlob(peer, sha256, have, claimed, onBytes);
        // a PEER_BUSY may have come from a race (a transfer this fetch saw end, its holder had not yet released): the share learned lasts until the next success there
        peerCaps.delete(peer);
      } catch (err) {
        options.signal?.throwIfAborted();
        if (err instanceof PeerBusyError) {
          // not a failure of this holder: it serves this peer fewer at once than MAX_TRANSFERS_PER_PEER (or another fetch of this node has some)
          peerCaps.set(peer, Math.max(1, load(peer) - 1));
          await transferEnded(1000);
          continue;
        }
        // the wait for a holder restarts only when one delivered something: a gone holder still in the DHT is no holder
        if (have.bytes > before) waitUntil = undefined;
        failedHere.add(peer);
        if (err instanceof SlowHolderError && !slow.has(peer)) {
          slow.add(peer);
          log.warn({ peer, what }, `shard holder ${peer} is too slow: ${err.message}; asking it only when no other holder has a shard`);
        }
        tried.set(peer, `stopped at byte ${have.bytes} of ${have.size ?? claimed}: ${(err as Error).message}`);
        log.info({ peer, what, at: have.bytes, err: (err as Error).message }, `shard transfer from ${peer} stopped; continuing elsewhere`);
        continue;
      } finally {
        inFlight.set(peer, load(peer) - 1);
        transferEnds.dispatchEvent(new Event('ended'));
        if (have.bytes > before) {
          contributors.add(peer);
          if (before > 0) resumed++;
        }
      }
      const got = have.sha256();
      if (got === sha256) return { data: have.data(), resumed };
      for (const p of contributors) {
        penalise(p, `served ${what} with sha256 ${got.slice(0, 16)}…, expected ${sha256.slice(0, 16)}…`);
        tried.set(p, penalised.get(p)!);
      }
      onBytes(-have.bytes);
      have.reset();
      contributors = new Set();
    }
  };

  // 1. The manifest, from a holder, proven to be the dataset the run names.
  const triedForManifest = new Map<string, string>();
  const getManifest = async (): Promise<{ manifest: Manifest; from: string }> => {
    // each look (the first, or one replacing a forged manifest mid-fetch) waits for a holder as long
    const waitUntil = Date.now() + waitForHolderMs;
    for (;;) {
      options.signal?.throwIfAborted();
      const holders = [...(await findHolders(true)).keys()];
      for (const peer of holders) {
        try {
          const reply = await call(peer, async (framed, stall) => {
            await framed.write({ t: 'manifest', datasetId }, stall());
            return framed.expect(manifestReplySchema, stall(), 'the manifest');
          });
          if (reply.t === 'refused') {
            triedForManifest.set(peer, `refused: ${reply.code}: ${reply.message}`);
            continue;
          }
          const m = reply.manifest;
          const id = datasetIdOf({ maxSeqLen: m.maxSeqLen, shortSeqProb: m.shortSeqProb, tokenizerSha256: m.tokenizerSha256 }, m.shards.map((s) => s.sha256));
          if (m.datasetId === datasetId && id === datasetId) return { manifest: m, from: peer };
          penalise(peer, `served a manifest whose content hashes to ${id}, not ${datasetId}`);
          triedForManifest.set(peer, penalised.get(peer)!);
        } catch (err) {
          triedForManifest.set(peer, (err as Error).message);
          log.info({ peer, err: (err as Error).message }, 'could not get the manifest from a holder');
        }
      }
      if (Date.now() > waitUntil) throw new ShardExchangeError(`no peer serves dataset ${datasetId}: waited ${Math.round(waitForHolderMs / 1000)} s; ${describeTried(triedForManifest, penalised)}`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };

  // 2. The tokenizer: one this store already has with that hash, or fetched.
  let { manifest, from: manifestFrom } = await getManifest();
  const tokenizerFile =
    datasets.localTokenizer(manifest.tokenizerSha256, options.dataDir)?.file ??
    keepTokenizerFile(options.dataDir, manifest.tokenizerSha256, (await fetchBlob('the tokenizer', manifest.tokenizerSha256, manifest.tokenizerBytes, () => true, () => undefined)).data);
  // The dataset id covers the tokenizer's hash and each shard's bytes, not the counts and sizes a
  // manifest gives for them (the model's vocabulary is taken from it, a shard's counts are stored with
  // it, the quota is reckoned with its sizes): a manifest whose counts or sizes its verified bytes
  // contradict is forged, and another holder's is taken.
  const { vocabSize } = loadTokenizer(tokenizerFile);
  const tokenizerBytes = fs.statSync(tokenizerFile).size;
  let replacing: Promise<void> | undefined;
  const replaceManifest = (why: string): Promise<void> =>
    (replacing ??= (async () => {
      penalise(manifestFrom, why);
      triedForManifest.set(manifestFrom, why);
      ({ manifest, from: manifestFrom } = await getManifest());
    })().finally(() => (replacing = undefined)));
  const tokenizerContradiction = (): string | undefined => {
    const what = `its tokenizer (sha256 ${manifest.tokenizerSha256.slice(0, 12)}…, checked)`;
    if (manifest.vocabSize !== vocabSize) return `served a manifest giving a vocabulary of ${manifest.vocabSize} tokens; ${what} has ${vocabSize}`;
    if (manifest.tokenizerBytes !== tokenizerBytes) return `served a manifest giving ${manifest.tokenizerBytes} bytes for ${what}, which has ${tokenizerBytes}`;
    return undefined;
  };
  for (let forged = tokenizerContradiction(); forged !== undefined; forged = tokenizerContradiction()) await replaceManifest(forged);

  // 3. The dataset row, and which shards to fetch.
  const cacheKey = `swarm-${datasetId.slice(0, 26)}`;
  datasets.beginFetched({
    cacheKey,
    source: `swarm dataset ${datasetId}`,
    datasetId,
    manifest: JSON.stringify(manifest),
    tokenizerHash: manifest.tokenizerSha256,
    tokenizerFile,
    params: { maxSeqLen: manifest.maxSeqLen, shortSeqProb: manifest.shortSeqProb, seed: 0, format: 'swarm', field: '', maxDocuments: null },
    vocabSize: manifest.vocabSize,
  });
  // the held shards' sizes are their stored bytes' (verified), not a manifest's
  const held = new Map(datasets.shardEntries(cacheKey).filter((s) => manifest.shards[s.seq]?.sha256 === s.sha256).map((s) => [s.seq, s.bytes]));
  /** Shards held, fetched or in flight, with their size: verified, or the manifest's claim while in flight. */
  const taken = new Map(held);
  let queue = chooseShards(manifest, held, self, options);
  const quota = options.quotaBytes ?? Infinity;
  /** Bytes of the shards held and stored (or being stored) by this fetch: verified sizes only. */
  let verifiedBytes = [...held.values()].reduce((a, b) => a + b, 0);
  let totalBytes = queue.reduce((n, i) => n + manifest.shards[i]!.bytes, 0);
  let shardsTotal = queue.length;

  // 4. The shards, `maxParallel` at a time, each stored as soon as it is verified.
  let bytes = 0;
  let shardsDone = 0;
  let resumed = 0;
  const report = () => {
    const seconds = (Date.now() - started) / 1000;
    const bytesPerSecond = seconds > 0 ? bytes / seconds : 0;
    options.onProgress?.({ datasetId, bytes, totalBytes, shardsDone, shardsTotal, bytesPerSecond, etaSeconds: bytesPerSecond > 0 ? Math.max(0, totalBytes - bytes) / bytesPerSecond : null });
  };
  // A manifest replaced for its sizes changes what fits the quota: the shards not begun are chosen again.
  const rechoose = () => {
    if (options.shards !== undefined) return;
    queue = chooseShards(manifest, taken, self, options);
    const others = [...taken.keys()].filter((i) => !held.has(i));
    shardsTotal = others.length + queue.length;
    totalBytes = [...others, ...queue].reduce((n, i) => n + (taken.get(i) ?? manifest.shards[i]!.bytes), 0);
  };
  const worker = async () => {
    // each shard is stored while the next one arrives; at most one store per worker is pending
    let storing: Promise<void> | undefined;
    try {
      for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
        const shard = manifest.shards[i]!;
        taken.set(i, shard.bytes);
        const got = await fetchBlob(`shard ${i}`, shard.sha256, shard.bytes, (have) => hasBit(have, i), (n) => {
          bytes += n;
          report();
        });
        resumed += got.resumed;
        const size = got.data.byteLength;
        taken.set(i, size);
        const counts = shardHeader(got.data);
        const contradiction = (): string | undefined => {
          const listed = manifest.shards[i]!;
          if (listed.bytes !== size) return `served a manifest giving ${listed.bytes} bytes for shard ${i}, whose bytes (sha256 checked) are ${size}`;
          return counts.examples === listed.examples && counts.tokens === listed.tokens ? undefined : `served a manifest listing ${listed.examples} examples and ${listed.tokens} tokens for shard ${i}, whose bytes (sha256 checked) hold ${counts.examples} and ${counts.tokens}`;
        };
        let forged = contradiction();
        if (forged !== undefined) {
          for (; forged !== undefined; forged = contradiction()) await replaceManifest(forged);
          datasets.replaceManifest(cacheKey, JSON.stringify(manifest));
          rechoose();
        }
        if (verifiedBytes + size > quota) {
          // chosen by a claim its bytes contradict (or with others so chosen): the quota holds what is verified
          taken.delete(i);
          release(got.data.buffer as ArrayBuffer);
          log.warn({ dataset: datasetId, shard: i, bytes: size }, `shard ${i} of dataset ${datasetId.slice(0, 12)}… has ${size} bytes, more than the ${quota - verifiedBytes} left of the cache quota: not stored`);
          continue;
        }
        verifiedBytes += size;
        await storing;
        storing = putShardOffThread(store, cacheKey, i, { data: got.data, examples: counts.examples, tokens: counts.tokens, sha256: shard.sha256 }).then((buffer) => {
          release(buffer);
          shardsDone++;
          report();
        });
      }
      await storing;
    } finally {
      // a fetch that failed leaves no store behind it (its error, if any, is not the one reported)
      await storing?.catch(() => undefined);
    }
  };
  // as many workers as shards may come to be wanted: a manifest replaced for its sizes may add some
  await Promise.all(Array.from({ length: options.shards === undefined ? parallel : Math.min(parallel, queue.length) }, worker));
  datasets.refreshFetched(cacheKey);
  const info = datasets.get(cacheKey)!;
  log.info({ dataset: datasetId, shards: shardsDone, bytes, ms: Date.now() - started }, `fetched ${shardsDone} shard(s) of dataset ${datasetId.slice(0, 12)}… (${bytes} bytes); holding ${info.shardCount} of ${manifest.shards.length}`);
  return {
    info,
    manifest,
    tokenizerFile,
    fetched: shardsDone,
    alreadyHeld: held.size,
    bytes,
    penalised: [...penalised].map(([peer, reason]) => ({ peer, reason })),
    resumed,
    durationMs: Date.now() - started,
  };
}

/** A holder's transfer fell below the fetch's minimum rate. */
class SlowHolderError extends ShardExchangeError {}

/** A holder refused a transfer with PEER_BUSY: this peer has its share of its slots (it is asked again once one ends). */
class PeerBusyError extends ShardExchangeError {}

/**
 * The manifest indices to fetch: `shards` when given, else a random permutation (seeded by this
 * peer's id, so peers spread over the shards) taken while the held + chosen bytes fit the quota.
 * `held`: manifest index → the bytes it takes (its stored bytes' size for a shard held).
 */
export function chooseShards(manifest: Manifest, held: ReadonlyMap<number, number>, peerId: string, options: Pick<FetchOptions, 'shards' | 'quotaBytes'>): number[] {
  if (options.shards !== undefined) {
    for (const i of options.shards) if (!Number.isInteger(i) || i < 0 || i >= manifest.shards.length) throw new RangeError(`shard index ${i}: the dataset has shards 0..${manifest.shards.length - 1}`);
    return [...new Set(options.shards)].filter((i) => !held.has(i));
  }
  const quota = options.quotaBytes ?? Infinity;
  let used = [...held.values()].reduce((a, b) => a + b, 0);
  const chosen: number[] = [];
  for (const i of shardOrder(manifest, peerId)) {
    if (held.has(i)) continue;
    const size = manifest.shards[i]!.bytes;
    if (used + size > quota) continue;
    used += size;
    chosen.push(i);
  }
  if (chosen.length === 0 && held.size === 0) {
    const smallest = Math.min(...manifest.shards.map((s) => s.bytes));
    throw new RangeError(`cache quota of ${quota} bytes cannot hold one shard of dataset ${manifest.datasetId} (the smallest has ${smallest} bytes)`);
  }
  return chosen;
}

/**
 * A fetch's open streams to holders between requests (shards/1.3.0: a stream carries one request
 * after another), so a shard costs no stream set-up. A stream is reused while the holder still waits
 * for requests on it (idle under half of STREAM_IDLE_MS, both sides open); one whose request failed
 * is never put back.
 */
class HolderStreams {
  private readonly idle = new Map<string, Array<{ readonly framed: FramedStream; readonly since: number }>>();

  take(peer: string): FramedStream | undefined {
    const list = this.idle.get(peer) ?? [];
    for (let entry = list.pop(); entry !== undefined; entry = list.pop()) {
      const { stream } = entry.framed;
      if (Date.now() - entry.since < STREAM_IDLE_MS / 2 && stream.status === 'open' && stream.remoteWriteStatus === 'writable') return entry.framed;
      void entry.framed.close(deadline(STREAM_IDLE_MS));
    }
    return undefined;
  }

  put(peer: string, framed: FramedStream): void {
    const list = this.idle.get(peer) ?? [];
    list.push({ framed, since: Date.now() });
    this.idle.set(peer, list);
  }

  /** Closes every idle stream (the holders then close theirs). */
  async close(signal: AbortSignal): Promise<void> {
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    await Promise.all(all.map((e) => e.framed.close(signal)));
  }
}

/**
 * A blob as its chunks arrive: copied into `buffer` (the fetch's own, moved to the store's worker
 * thread without another copy; the muxer's buffers are let go at once) and hashed as it grows, so
 * verifying a complete blob does not read it all again at the end. The buffer grows (at least
 * doubling, up to the size its holder states) as bytes arrive: a stated size is not verified.
 */
class Received {
  private buffer: Buffer;
  private hash = createHash('sha256');
  bytes = 0;
  /** The size the last holder stated. */
  size: number | undefined;

  constructor(buffer: ArrayBuffer) {
    this.buffer = Buffer.from(buffer);
  }

  /** Appends a chunk of a blob whose holder states `size` bytes in all. */
  push(chunk: Uint8ArrayList, size: number): void {
    this.size = size;
    const needed = this.bytes + chunk.byteLength;
    if (needed > this.buffer.byteLength) {
      const grown = Buffer.from(new ArrayBuffer(Math.min(size, Math.max(needed, 2 * this.buffer.byteLength))));
      grown.set(this.buffer.subarray(0, this.bytes));
      this.buffer = grown;
    }
    for (const part of chunk) {
      this.buffer.set(part, this.bytes);
      this.hash.update(part);
      this.bytes += part.byteLength;
    }
  }

  sha256(): string {
    return this.hash.copy().digest('hex');
  }

  /** The bytes received, a view at offset 0 of the buffer. */
  data(): Buffer {
    return this.buffer.subarray(0, this.bytes);
  }

  reset(): void {
    this.hash = createHash('sha256');
    this.bytes = 0;
  }
}

/** This peer's own order of a dataset's shards (manifest indices): what it fetches first, and next within a quota. */
export function shardOrder(manifest: Manifest, peerId: string): Uint32Array {
  return new Prng(`shards:${peerId}:${manifest.datasetId}`).permutation(manifest.shards.length);
}

/** The holders tried for one blob (or the manifest) and why each did not deliver it. */
function describeTried(tried: ReadonlyMap<string, string>, penalised: ReadonlyMap<string, string>): string {
  const others = [...penalised.keys()].filter((peer) => !tried.has(peer)).length;
  const skipped = others > 0 ? `; ${others} other holder(s) skipped earlier (serving wrong bytes, or another Cohort release)` : '';
  if (tried.size === 0) return `no peer advertised it in the DHT${skipped}`;
  return `tried ${tried.size} holder(s): ${[...tried].map(([peer, why]) => `${peer} (${why})`).join('; ')}${skipped}`;
}

