import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test, { type TestContext } from 'node:test';
import { pino } from 'pino';
import type { z } from 'zod';
import { DatasetStore, type DatasetInfo } from '../../src/data/dataset-store.js';
import { prepareDataset } from '../../src/data/prepare.js';
import { openBatchStream } from '../../src/data/stream.js';
import { checkBatch } from '../../src/engine/batch.js';
import { ShardServer, chooseShards, fetchDataset, holdingsOf, manifestOf, shardOrder, type FetchProgress, type Manifest } from '../../src/shards/index.js';
import { holdingKey } from '../../src/shards/server.js';
import { MAX_BLOB_BYTES, MAX_SHARD_FRAME_BYTES, MAX_TRANSFERS_PER_PEER, SHARDS_PROTOCOL, blobHeaderSchema, encodeBits, manifestReplySchema, shardRequestSchema } from '../../src/shards/messages.js';
import { FramedStream } from '../../src/averaging/framing.js';
import { openStore, type Store } from '../../src/store/index.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { RunDataError } from '../../src/training/errors.js';
import { runDataset } from '../../src/training/run-data.js';
import { sendAllButLastByte } from '../helpers/hostile-stream.js';
import { capturingLogger, warningLog } from '../helpers/log.js';
import { startSwarm, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const quiet = pino({ level: 'silent' });

interface Peer {
  readonly node: SwarmNode;
  readonly store: Store;
  readonly dataDir: string;
}

async function peers(t: TestContext, count: number): Promise<Peer[]> {
  const nodes = await startSwarm(t, count, { runId: 'shards-test' });
  return nodes.map((node) => {
    const dataDir = tmpDir(t);
    const store = openStore(dataDir);
    t.after(() => store.close());
    return { node, store, dataDir };
  });
}

/** The same slice of the bundled corpus on every founder: preparation is deterministic, so they hold the same dataset. */
async function found(peer: Peer): Promise<DatasetInfo> {
  return (await prepareDataset({ store: peer.store, dataDir: peer.dataDir, source: 'bundled', maxDocuments: 6, vocabSize: 1500, shardExamples: 25 })).info;
}

async function serve(t: TestContext, peer: Peer, options: ConstructorParameters<typeof ShardServer>[3] = {}): Promise<ShardServer> {
  const server = new ShardServer(peer.node, peer.store, quiet, options);
  await server.start();
  t.after(() => server.stop());
  return server;
}

function shardBytes(store: Store, cacheKey: string): Map<string, Buffer> {
  const rows = store.db.prepare('SELECT sha256, data FROM shards WHERE cache_key = ?').all(cacheKey) as { sha256: string; data: Buffer }[];
  return new Map(rows.map((r) => [r.sha256, r.data]));
}

/** Alters every shard's bytes in `peer`'s store, keeping their sha256 rows: what it serves does not match. */
function forgeShards(peer: Peer, cacheKey: string): void {
  for (const [sha256, data] of shardBytes(peer.store, cacheKey)) {
    data[data.length - 1]! ^= 0xff;
    peer.store.db.prepare('UPDATE shards SET data = ? WHERE sha256 = ?').run(data, sha256);
  }
}

/** Gives `peer` the dataset's tokenizer, so a fetch goes straight to the shards. */
function copyTokenizer(info: DatasetInfo, peer: Peer): void {
  fs.mkdirSync(path.join(peer.dataDir, 'data', 'tokenizers'), { recursive: true });
  fs.copyFileSync(info.tokenizerFile, path.join(peer.dataDir, 'data', 'tokenizers', `${info.tokenizerHash}.json`));
}

test('a newcomer with an empty data directory fetches the tokenizer and every shard from a seeder, verified, and trains on them', async (t) => {
  const [seeder, newcomer] = await peers(t, 2);
  const original = await found(seeder!);
  await serve(t, seeder!, { maxConcurrentTransfers: 2 });
  const progress: FetchProgress[] = [];
  const r = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: original.datasetId!, dataDir: newcomer!.dataDir, log: quiet, onProgress: (p) => progress.push(p) });

  assert.equal(r.fetched, original.shardCount);
  assert.equal(r.info.datasetId, original.datasetId);
  assert.equal(r.info.tokenizerHash, original.tokenizerHash);
  assert.equal(createHash('sha256').update(fs.readFileSync(r.tokenizerFile)).digest('hex'), original.tokenizerHash);
  assert.ok(r.tokenizerFile.startsWith(newcomer!.dataDir));
  assert.deepEqual(shardBytes(newcomer!.store, r.info.cacheKey), shardBytes(seeder!.store, original.cacheKey));
  assert.deepEqual([r.info.examples, r.info.tokens, r.info.vocabSize], [original.examples, original.tokens, original.vocabSize]);
  assert.equal(new DatasetStore(newcomer!.store.db).byDatasetId(original.datasetId!)?.cacheKey, r.info.cacheKey);
  // progress: bytes grow to the total, with a rate and an ETA
  const last = progress.at(-1)!;
  assert.deepEqual([last.bytes, last.shardsDone], [last.totalBytes, original.shardCount]);
  assert.equal(last.totalBytes, original.bytes);
  assert.ok(progress.every((p, i) => i === 0 || p.bytes >= progress[i - 1]!.bytes));
  assert.ok(progress.some((p) => p.etaSeconds !== null && p.bytesPerSecond > 0));

  const stream = openBatchStream({ store: newcomer!.store, cacheKey: r.info.cacheKey, batchSize: 4, seed: 1, peerId: newcomer!.node.peerId.toString(), worker: false });
  const batch = await stream.next();
  await stream.close();
  assert.ok(!batch.done, 'the fetched dataset yields a batch');
  checkBatch(batch.value, r.info.vocabSize);

  // once it advertises, it is a holder too; a second fetch has nothing left to do
  const again = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: original.datasetId!, dataDir: newcomer!.dataDir, log: quiet });
  assert.deepEqual([again.fetched, again.alreadyHeld, again.bytes], [0, original.shardCount, 0]);
});

/**
 * Only `liar` serves at first: the newcomer's fetch must find it out (a penalty logged), then wait for
 * `honest`, which starts serving only then. The fetch's result.
 */
async function fetchPastLiar(t: TestContext, liar: Peer, honest: Peer, newcomer: Peer, info: DatasetInfo, options: { quotaBytes?: number } = {}): Promise<Awaited<ReturnType<typeof fetchDataset>>> {
  await serve(t, liar);
  const { warnings, log } = warningLog();
  const fetching = fetchDataset(newcomer.node, newcomer.store, { datasetId: info.datasetId!, dataDir: newcomer.dataDir, maxParallel: 1, log, ...options });
  await waitFor('the liar to be penalised', () => warnings.some((w) => w.includes(`skipping shard holder ${liar.node.peerId.toString()}`)));
  await serve(t, honest);
  return fetching;
}

test('a holder whose tokenizer.json was altered on disk refuses to serve it, naming why, and says once in its log what is wrong', async (t) => {
  const [holder, newcomer] = await peers(t, 2);
  const info = await found(holder!);
  // the same size, so the manifest the holder builds still states the run's tokenizer size
  const altered = fs.readFileSync(info.tokenizerFile);
  altered[altered.length >> 1]! ^= 0x01;
  fs.writeFileSync(info.tokenizerFile, altered);
  const { warnings, log } = warningLog();
  const server = new ShardServer(holder!.node, holder!.store, log);
  await server.start();
  t.after(() => server.stop());
  const fetch = () => fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, waitForHolderMs: 1000, log: quiet });
  for (let i = 0; i < 2; i++) {
    await assert.rejects(fetch(), (err: Error) => {
      assert.match(err.message, new RegExp(`refused ${info.tokenizerHash.slice(0, 12)}…: NOT_FOUND: this holder's tokenizer with sha256 ${info.tokenizerHash} is missing or altered on disk`));
      assert.doesNotMatch(err.message, /sha256 mismatch|does not match/i);
      return true;
    });
  }
  assert.equal(server.bytesSent, 0, 'no byte of the altered file went out');
  const said = warnings.filter((w) => w.startsWith(`not serving the tokenizer with sha256 ${info.tokenizerHash}: ${info.tokenizerFile} is missing, unreadable or altered on disk`));
  assert.equal(said.length, 1, warnings.join('\n'));
});

test('a holder serving altered bytes is rejected and penalised; the shards come from another holder', async (t) => {
  const [honest, liar, newcomer] = await peers(t, 3);
  const info = await found(honest!);
  const forged = await found(liar!);
  assert.equal(forged.datasetId, info.datasetId);
  forgeShards(liar!, forged.cacheKey);
  const r = await fetchPastLiar(t, liar!, honest!, newcomer!, info);
  assert.deepEqual(r.penalised.map((p) => p.peer), [liar!.node.peerId.toString()]);
  assert.match(r.penalised[0]!.reason, /served shard \d+ with sha256 [0-9a-f]{16}…, expected [0-9a-f]{16}…/);
  assert.deepEqual(shardBytes(newcomer!.store, r.info.cacheKey), shardBytes(honest!.store, info.cacheKey));
});

/** Makes `liar` (holding the dataset of `info`) serve `forge` of the honest manifest. The honest manifest. */
function forgeManifest(honest: Peer, liar: Peer, info: DatasetInfo, held: DatasetInfo, forge: (m: Manifest) => Manifest): Manifest {
  const manifest = manifestOf(info, new DatasetStore(honest.store.db));
  liar.store.db.prepare('UPDATE datasets SET manifest = ? WHERE cache_key = ?').run(JSON.stringify(forge(manifest)), held.cacheKey);
  return manifest;
}

/** The most bytes of ArrayBuffers this process holds while `work` runs (sampled every 10 ms). */
async function peakArrayBuffers<T>(work: Promise<T>): Promise<{ result: T; peak: number }> {
  let peak = process.memoryUsage().arrayBuffers;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().arrayBuffers)), 10);
  try {
    return { result: await work, peak };
  } finally {
    clearInterval(sampler);
  }
}

/**
 * The dataset id covers the tokenizer's hash and the shards' bytes, not the counts and sizes a
 * manifest gives for them: a holder serving such a forged manifest (of the right id) must not set the
 * newcomer's vocabulary (its model's size) nor the counts stored with each shard (checked when training
 * reads it), make it allocate the sizes it states, nor get honest transfers refused for their size.
 */
for (const [what, forge] of [
  ['a vocabulary its tokenizer does not have', (m: Manifest): Manifest => ({ ...m, vocabSize: m.vocabSize + 1 })],
  ['shard counts their bytes contradict', (m: Manifest): Manifest => ({ ...m, shards: m.shards.map((x) => ({ ...x, examples: x.examples + 1, tokens: x.tokens + 7 })) })],
  ['shards of 512 MiB each', (m: Manifest): Manifest => ({ ...m, shards: m.shards.map((x) => ({ ...x, bytes: MAX_BLOB_BYTES })) })],
  ['a tokenizer of 1 byte', (m: Manifest): Manifest => ({ ...m, tokenizerBytes: 1 })],
] as const) {
  test(`a holder serving a manifest of the right id with ${what} is penalised; the newcomer keeps an honest holder’s manifest and the counts of the bytes`, async (t) => {
    const [honest, liar, newcomer] = await peers(t, 3);
    const info = await found(honest!);
    const manifest = forgeManifest(honest!, liar!, info, await found(liar!), forge);
    const { result: r, peak } = await peakArrayBuffers(fetchPastLiar(t, liar!, honest!, newcomer!, info));
    assert.deepEqual(r.penalised.map((p) => p.peer), [liar!.node.peerId.toString()]);
    assert.match(r.penalised[0]!.reason, /served a manifest (giving a vocabulary of \d+ tokens; its tokenizer .* has \d+|listing \d+ examples and \d+ tokens for shard \d+, whose bytes \(sha256 checked\) hold \d+ and \d+|giving \d+ bytes for shard \d+, whose bytes \(sha256 checked\) are \d+|giving 1 bytes for its tokenizer .*, which has \d+)/);
    assert.equal(r.info.vocabSize, info.vocabSize);
    assert.deepEqual(JSON.parse(r.info.manifest!), manifest, 'the manifest kept (and served to others) is the honest one');
    const counts = (store: Store, cacheKey: string) => new DatasetStore(store.db).shardEntries(cacheKey).map(({ seq, examples, tokens }) => ({ seq, examples, tokens }));
    assert.deepEqual(counts(newcomer!.store, r.info.cacheKey), counts(honest!.store, info.cacheKey));
    // a stated size is not allocated: this whole process (three nodes) holds far less than one 512 MiB claim
    assert.ok(peak < 256 * 1024 * 1024, `${(peak / 2 ** 20).toFixed(0)} MiB of ArrayBuffers at most during the fetch`);
  });
}

test('a manifest understating every shard does not get a fetch past its cache quota: it is found forged by the first shard, and the quota holds verified sizes', async (t) => {
  const [honest, liar, newcomer] = await peers(t, 3);
  const info = await found(honest!);
  // by the forged sizes every shard fits in a quota of half the dataset
  const manifest = forgeManifest(honest!, liar!, info, await found(liar!), (m) => ({ ...m, shards: m.shards.map((x) => ({ ...x, bytes: 1 })) }));
  const quota = Math.floor(info.bytes / 2);
  const r = await fetchPastLiar(t, liar!, honest!, newcomer!, info, { quotaBytes: quota });
  assert.deepEqual(r.penalised.map((p) => p.peer), [liar!.node.peerId.toString()]);
  assert.match(r.penalised[0]!.reason, /served a manifest giving 1 bytes for shard \d+, whose bytes \(sha256 checked\) are \d+/);
  assert.deepEqual(JSON.parse(r.info.manifest!), manifest);
  const sizes = new DatasetStore(newcomer!.store.db).shardSizes(r.info.cacheKey);
  const held = [...sizes.values()].reduce((a, b) => a + b, 0);
  assert.ok(sizes.size > 0 && held <= quota, `${held} bytes in ${sizes.size} shards held, quota ${quota}`);
  // the shards the honest manifest gives this peer within the quota: the first, fetched by the forged one, is the first of its order either way
  assert.deepEqual([...sizes.keys()].sort((x, y) => x - y), chooseShards(manifest, new Map(), newcomer!.node.peerId.toString(), { quotaBytes: quota }).sort((x, y) => x - y));
});

/** A holder that advertises every shard of `manifest` and sends any blob asked for right, one byte a second: it never stalls. */
async function trickler(peer: Peer, manifest: Manifest, blobs: ReadonlyMap<string, Uint8Array>): Promise<void> {
  await peer.node.handle(SHARDS_PROTOCOL, (stream) => {
    const framed = new FramedStream(stream, MAX_SHARD_FRAME_BYTES, 'shard requests');
    void (async () => {
      for (let request = await framed.read(shardRequestSchema, AbortSignal.timeout(60_000)); request !== null; request = await framed.read(shardRequestSchema, AbortSignal.timeout(60_000))) {
        if (request.t === 'manifest') {
          await framed.write({ t: 'manifest', manifest });
          continue;
        }
        const blob = blobs.get(request.sha256)!;
        await framed.write({ t: 'blob', size: blob.byteLength });
        for (let at = request.offset; at < blob.byteLength; at++) {
          await framed.writeChunk(at - request.offset, blob.subarray(at, at + 1));
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    })().catch(() => framed.abort(new Error('trickler done')));
  }, { allowRelayed: false });
  await holdingsOf(peer.node).store(holdingKey(manifest.datasetId), '', { shards: manifest.shards.length, have: encodeBits(manifest.shards.map(() => true)) }, Date.now() + 60_000);
}

test('a holder sending a shard a byte a second (never stalling) is left for another once under the minimum rate, and asked only when no other has a shard', async (t) => {
  const [honest, slow, newcomer] = await peers(t, 3);
  const info = await found(honest!);
  copyTokenizer(info, newcomer!);
  await trickler(slow!, manifestOf(info, new DatasetStore(honest!.store.db)), shardBytes(honest!.store, info.cacheKey));
  const { warnings, log } = warningLog();
  const fetching = fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, maxParallel: 1, stallTimeoutMs: 3000, minBytesPerSecond: 4096, log });
  // only the trickler holds the shards at first: the newcomer must leave it, then wait for another holder
  await waitFor('the trickler to be found too slow', () => warnings.some((w) => w.includes(`shard holder ${slow!.node.peerId.toString()} is too slow`)), 30_000);
  await serve(t, honest!);
  const r = await fetching;
  assert.equal(r.fetched, info.shardCount);
  assert.deepEqual(r.penalised, [], 'what the trickler sent was right');
  assert.ok(r.resumed >= 1, 'the shard it had begun continued from its byte offset');
  assert.deepEqual(shardBytes(newcomer!.store, r.info.cacheKey), shardBytes(honest!.store, info.cacheKey));
});

/** Gives `peer` a complete dataset of no shards whose tokenizer.json is `bytes`: a large blob it serves by sha256. */
function holdBlob(peer: Peer, bytes: Buffer): string {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const file = path.join(peer.dataDir, 'big-tokenizer.json');
  fs.writeFileSync(file, bytes);
  const datasets = new DatasetStore(peer.store.db);
  datasets.begin({ cacheKey: 'big', source: 'test', datasetHash: 'big', tokenizerHash: sha256, tokenizerFile: file, params: { maxSeqLen: 64, shortSeqProb: 0.1, seed: 0, format: 'test', field: '', maxDocuments: null }, vocabSize: 100 });
  datasets.finish('big', { documents: 0, sentences: 0, examples: 0, tokens: 0, shardCount: 0 });
  return sha256;
}

/**
 * A reader that asks `holder` for blob `sha256` on `streams` streams at once, 30 times on each, and
 * takes one yamux window (256 KiB at first) every 4 s of each: every chunk leaves within the holder's
 * stall timeout, so it never stalls. Collects the refusals it gets; stops with `signal`.
 */
function slowReader(reader: Peer, holder: string, sha256: string, streams: number, refusals: string[], signal: AbortSignal): void {
  const pause = () => new Promise((resolve) => setTimeout(resolve, 4000));
  const one = async () => {
    while (!signal.aborted) {
      let header: z.infer<typeof blobHeaderSchema> | undefined;
      try {
        const framed = new FramedStream(await reader.node.dial(holder, SHARDS_PROTOCOL, { allowRelayed: false, signal }), MAX_SHARD_FRAME_BYTES, 'slow reader');
        // paused from the start, so yamux never widens the window beyond its first 256 KiB
        framed.stream.pause();
        // the requests of a whole fetch at once: the holder takes the next as soon as it has written the last
        for (let i = 0; i < 30; i++) await framed.write({ t: 'get', sha256, offset: 0 });
        const answer = framed.expect(blobHeaderSchema, AbortSignal.any([signal, AbortSignal.timeout(60_000)]), 'the header').then((h) => (header = h));
        answer.catch(() => undefined);
        // one window every 4 s: what arrived is handed to the reader, and the holder may send 256 KiB more
        while (!signal.aborted && framed.stream.status === 'open' && header?.t !== 'refused') {
          await pause();
          framed.stream.resume();
          framed.stream.pause();
        }
        framed.abort(new Error('slow reader done'));
      } catch {
        // the holder ended the transfer (or refused it and closed): ask again, a second later (not to spin)
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      if (header?.t !== 'refused') continue; // served to the end or ended: ask again at once
      refusals.push(header.message);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  for (let i = 0; i < streams; i++) void one();
}

test('slow readers cannot keep a holder’s slots: a reader draining under the floor is ended and refused a while; a newcomer is served', { timeout: 120_000 }, async (t) => {
  const [holder, reader1, reader2, newcomer] = await peers(t, 4);
  const info = await found(holder!);
  const big = holdBlob(holder!, randomBytes(4 * 1024 * 1024));
  // a 10 s stall timeout, one window each 4 s: the readers never stall; 4 MiB/s (a 1 s allowance for the blob, on top of the 10 s) is far above their pace
  const server = await serve(t, holder!, { maxConcurrentTransfers: 2, stallTimeoutMs: 10_000, chunkBytes: 64 * 1024, minReaderBytesPerSecond: 4 * 1024 * 1024 });
  const stop = new AbortController();
  t.after(() => stop.abort());
  const refusals: string[] = [];
  // two identities, two streams each: they take both slots
  const holderId = holder!.node.peerId.toString();
  slowReader(reader1!, holderId, big, 2, refusals, stop.signal);
  slowReader(reader2!, holderId, big, 2, refusals, stop.signal);
  await waitFor('both slots taken by the slow readers', () => server.bytesSent >= 512 * 1024);
  const r = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, waitForHolderMs: 45_000, log: quiet });
  assert.equal(r.fetched, info.shardCount);
  await waitFor('a reader ended for its pace to be refused when it asks again', () => refusals.some((m) => /ended for reading too slowly; refused for \d+ s more/.test(m)));
});

test('one stream carries a fetch’s requests in turn; a shard altered mid-stream is still rejected and its holder penalised', async (t) => {
  const [honest, liar, newcomer] = await peers(t, 3);
  const info = await found(honest!);
  const forged = await found(liar!);
  copyTokenizer(info, newcomer!);
  // the liar alters only the second shard the newcomer asks for: the first comes right over the same stream
  const order = shardOrder(manifestOf(info, new DatasetStore(honest!.store.db)), newcomer!.node.peerId.toString());
  const second = manifestOf(info, new DatasetStore(honest!.store.db)).shards[order[1]!]!;
  const data = shardBytes(liar!.store, forged.cacheKey).get(second.sha256)!;
  data[0]! ^= 0xff;
  liar!.store.db.prepare('UPDATE shards SET data = ? WHERE sha256 = ?').run(data, second.sha256);
  const liarServer = await serve(t, liar!);
  const { warnings, log } = warningLog();
  const fetching = fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, maxParallel: 1, log });
  await waitFor('the liar to be penalised', () => warnings.some((w) => w.includes(`skipping shard holder ${liar!.node.peerId.toString()}`)));
  const honestServer = await serve(t, honest!);
  const r = await fetching;
  assert.equal(liarServer.streams, 1, 'the manifest and both shards came over one stream');
  assert.equal(liarServer.served, 2);
  assert.deepEqual(r.penalised.map((p) => p.peer), [liar!.node.peerId.toString()]);
  assert.match(r.penalised[0]!.reason, new RegExp(`served shard ${order[1]!} with sha256 [0-9a-f]{16}…, expected ${second.sha256.slice(0, 16)}…`));
  assert.deepEqual(shardBytes(newcomer!.store, r.info.cacheKey), shardBytes(honest!.store, info.cacheKey));
  assert.equal(honestServer.served, info.shardCount - 1);
  assert.ok(honestServer.streams < honestServer.served, `${honestServer.streams} stream(s) for ${honestServer.served} shards`);
});

test('a seeder stopped mid-shard: the newcomer waits, then resumes from the same byte offset at another holder', async (t) => {
  const [first, second, newcomer] = await peers(t, 3);
  const info = await found(first!);
  await found(second!);
  const biggest = new DatasetStore(first!.store.db).shardEntries(info.cacheKey).sort((a, b) => b.bytes - a.bytes)[0]!;
  assert.ok(biggest.bytes > 4000, `shard of ${biggest.bytes} bytes`);
  // The newcomer has the tokenizer already (it would come first and take long at this pace).
  copyTokenizer(info, newcomer!);
  // 1 KiB frames at 1 KiB/s after a 1 KiB burst: the shard takes seconds, so it can be cut in the middle.
  await serve(t, first!, { uploadBytesPerSecond: 1024, chunkBytes: 1024 });
  let received = 0;
  const fetching = fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, shards: [biggest.seq], stallTimeoutMs: 3000, log: quiet, onProgress: (p) => (received = p.bytes) });
  await waitFor('a few KiB of the shard', () => received >= 2048);
  await first!.node.stop();
  const cut = received;
  assert.ok(cut < biggest.bytes, `${cut} of ${biggest.bytes} bytes before the cut`);
  await serve(t, second!);
  const r = await fetching;
  assert.equal(r.fetched, 1);
  assert.ok(r.resumed >= 1, 'the transfer continued from an offset');
  assert.equal(r.bytes, biggest.bytes, 'no byte was fetched twice');
  assert.deepEqual(shardBytes(newcomer!.store, r.info.cacheKey).get(biggest.sha256), shardBytes(first!.store, info.cacheKey).get(biggest.sha256));
  assert.equal(r.info.shardCount, 1);
});

test('a seeder serves a bounded number of transfers at once: the others are told BUSY, retry, and all finish', async (t) => {
  const [seeder, a, b] = await peers(t, 3);
  const info = await found(seeder!);
  const server = await serve(t, seeder!, { maxConcurrentTransfers: 1, uploadBytesPerSecond: 64 * 1024, chunkBytes: 4096 });
  const fetch = (p: Peer) => fetchDataset(p.node, p.store, { datasetId: info.datasetId!, dataDir: p.dataDir, maxParallel: 2, log: quiet });
  const [ra, rb] = await Promise.all([fetch(a!), fetch(b!)]);
  for (const r of [ra, rb]) assert.deepEqual([r.info.datasetId, r.info.shardCount], [info.datasetId, info.shardCount]);
  assert.ok(server.busyRefusals > 0, 'four streams asked at once, one was served');
  assert.equal(server.served, 2 * (info.shardCount + 1), 'each newcomer: the tokenizer and every shard, once');
});

test('a newcomer whose only holder is a seeder with the default slots keeps to its per-peer share: 4 shards in flight, none refused, all fetched', async (t) => {
  const [seeder, newcomer] = await peers(t, 2);
  const info = await found(seeder!);
  assert.ok(info.shardCount > MAX_TRANSFERS_PER_PEER, `${info.shardCount} shards`);
  const server = await serve(t, seeder!);
  const r = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, maxParallel: 4, log: quiet });
  assert.equal(r.fetched, info.shardCount);
  assert.equal(server.busyRefusals, 0, 'the fetcher never asked for more than its share of the slots');
});

test('a holder serving a peer fewer transfers at once than the fetcher runs there: PEER_BUSY is waited out, not counted as a failed holder', async (t) => {
  const [seeder, newcomer] = await peers(t, 2);
  const info = await found(seeder!);
  copyTokenizer(info, newcomer!);
  // 2 slots: 1 per peer. At 1 KiB/s a shard takes seconds, longer than the newcomer waits for a holder it counted as failed
  const server = await serve(t, seeder!, { maxConcurrentTransfers: 2, uploadBytesPerSecond: 1024, chunkBytes: 1024 });
  const biggest = new DatasetStore(seeder!.store.db).shardEntries(info.cacheKey).sort((a, b) => b.bytes - a.bytes).slice(0, 2);
  assert.ok(biggest.every((s) => s.bytes > 3000), `shards of ${biggest.map((s) => s.bytes).join(', ')} bytes`);
  const r = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, shards: biggest.map((s) => s.seq), maxParallel: 2, waitForHolderMs: 1500, log: quiet });
  assert.equal(r.fetched, 2);
  assert.ok(server.busyRefusals >= 1, 'the second transfer in flight was refused PEER_BUSY');
});

/**
 * A peer asking `holder` for blob `sha256` on `streams` streams at once, reading each answer's header
 * and none of its bytes (its streams pause once their read buffer is full, so the transfers it got
 * keep their slots). The headers' `t` or refusal code, in the order they came.
 */
async function greedy(peer: Peer, holder: string, sha256: string, streams: number, signal: AbortSignal): Promise<string[]> {
  const answers: string[] = [];
  await Promise.all(
    Array.from({ length: streams }, async () => {
      const framed = new FramedStream(await peer.node.dial(holder, SHARDS_PROTOCOL, { allowRelayed: false, signal }), MAX_SHARD_FRAME_BYTES, 'greedy reader');
      signal.addEventListener('abort', () => framed.abort(new Error('greedy reader done')));
      await framed.write({ t: 'get', sha256, offset: 0 }, signal);
      const header = await framed.expect(blobHeaderSchema, AbortSignal.any([signal, AbortSignal.timeout(30_000)]), 'the header');
      answers.push(header.t === 'blob' ? 'blob' : header.code);
    }),
  );
  return answers;
}

test('one peer cannot take all of a seeder’s slots: past its share it is told PEER_BUSY, and another peer is served meanwhile', async (t) => {
  const [holder, hog, newcomer] = await peers(t, 3);
  const info = await found(holder!);
  copyTokenizer(info, newcomer!);
  const big = holdBlob(holder!, randomBytes(16 * 1024 * 1024));
  // 4 slots, 2 per peer; the hog's transfers stall (it reads nothing) but last the whole test
  const server = await serve(t, holder!, { maxConcurrentTransfers: 4, stallTimeoutMs: 120_000 });
  const stop = new AbortController();
  t.after(() => stop.abort());
  const answers = await greedy(hog!, holder!.node.peerId.toString(), big, 4, stop.signal);
  assert.deepEqual(answers.sort(), ['PEER_BUSY', 'PEER_BUSY', 'blob', 'blob']);
  const r = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, waitForHolderMs: 5000, log: quiet });
  assert.equal(r.fetched, info.shardCount);
  assert.ok(server.served >= info.shardCount, `${server.served} transfers completed while the hog held ${answers.filter((a) => a === 'blob').length}`);
});

test('parallel shards go to different holders: with two holders and two shards in flight, each serves half of them', async (t) => {
  const [x, y, newcomer] = await peers(t, 3);
  const info = await found(x!);
  assert.equal((await found(y!)).datasetId, info.datasetId);
  assert.ok(info.shardCount >= 4, `${info.shardCount} shards`);
  const servers = [await serve(t, x!), await serve(t, y!)];
  copyTokenizer(info, newcomer!);
  await waitFor('the newcomer to see both holders', async () => (await holdingsOf(newcomer!.node).get(holdingKey(info.datasetId!))).size === 2);
  const r = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, maxParallel: 2, log: quiet });
  assert.equal(r.fetched, info.shardCount);
  // the second transfer in flight always goes to the holder the first is not using (at random, this spread is rare)
  const served = servers.map((s) => s.served);
  assert.ok(Math.abs(served[0]! - served[1]!) <= 1 && served[0]! + served[1]! === info.shardCount, `shards served by each holder: ${served.join(', ')}`);
});

test('shards to fetch: a random subset per peer that fits the quota, counting those held; a quota below one shard is an error', async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir);
  t.after(() => store.close());
  const info = (await prepareDataset({ store, dataDir, source: 'bundled', maxDocuments: 6, vocabSize: 1500, shardExamples: 25 })).info;
  const manifest = manifestOf(info, new DatasetStore(store.db));
  const sizes = manifest.shards.map((s) => s.bytes);
  const quota = Math.floor(info.bytes / 2);
  const a = chooseShards(manifest, new Map(), 'peer-a', { quotaBytes: quota });
  const b = chooseShards(manifest, new Map(), 'peer-b', { quotaBytes: quota });
  for (const chosen of [a, b]) assert.ok(chosen.reduce((n, i) => n + sizes[i]!, 0) <= quota && chosen.length > 0);
  assert.notDeepEqual(a, b, 'peers spread over the shards');
  assert.deepEqual(chooseShards(manifest, new Map(), 'peer-a', { quotaBytes: quota }), a, 'the same peer chooses the same shards again');
  const more = chooseShards(manifest, new Map(a.map((i) => [i, sizes[i]!])), 'peer-a', { quotaBytes: info.bytes });
  assert.deepEqual([...a, ...more].sort((x, y) => x - y), manifest.shards.map((_, i) => i), 'a larger quota later adds the rest');
  assert.throws(() => chooseShards(manifest, new Map(), 'peer-a', { quotaBytes: Math.min(...sizes) - 1 }), /cannot hold one shard/);
  assert.throws(() => chooseShards(manifest, new Map(), 'peer-a', { shards: [manifest.shards.length] }), /shard index/);
});

test('the run’s data cannot be had: RunDataError names the dataset or the shard, each holder tried and why, and what to do', { timeout: 120_000 }, async (t) => {
  const [holder, liar, newcomer] = await peers(t, 3);
  const info = await found(holder!);
  const data = { datasetId: info.datasetId!, tokenizerSha256: info.tokenizerHash };
  const attempt = (o: { waitForHolderMs?: number } = {}) => runDataset({ node: newcomer!.node, store: newcomer!.store, dataDir: newcomer!.dataDir, log: quiet, data, waitForHolderMs: 1500, ...o });
  const fails = async (what: string, re: RegExp) => {
    const err = await attempt().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof RunDataError, `${what}: ${String(err)}`);
    assert.match(err.message, new RegExp(`^could not fetch the run's dataset ${info.datasetId!} from the swarm: `));
    assert.match(err.message, re, what);
    assert.match(err.message, /retry when a peer holding it is online \(`cohort status --join CODE` shows how many peers hold each shard\)$/);
  };

  // 1. nobody holds it
  await fails('no holder', new RegExp(`no peer serves dataset ${info.datasetId!}: waited 2 s; no peer advertised it in the DHT`));

  // 2. the only holder serves wrong bytes for every shard
  await found(liar!);
  forgeShards(liar!, info.cacheKey);
  copyTokenizer(info, newcomer!);
  await serve(t, liar!);
  const liarId = liar!.node.peerId.toString();
  await fails('wrong bytes', new RegExp(`no holder left for shard \\d+ \\(sha256 [0-9a-f]{12}…\\) of dataset ${info.datasetId!} after waiting 2 s for one: tried 1 holder\\(s\\): ${liarId} \\(served shard \\d+ with sha256 [0-9a-f]{16}…, expected [0-9a-f]{16}…\\)`));

  // 3. the only honest holder goes away mid-shard (the liar is skipped again)
  const slow = await serve(t, holder!, { uploadBytesPerSecond: 1024, chunkBytes: 1024 });
  const rejected = attempt().then(() => undefined, (e: unknown) => e);
  await waitFor('a shard transfer from the slow holder', () => slow.bytesSent >= 2048, 60_000);
  await holder!.node.stop();
  const err = await rejected;
  assert.ok(err instanceof RunDataError, String(err));
  assert.match(err.message, new RegExp(`no holder left for shard \\d+ .*: tried \\d holder\\(s\\): .*${holder!.node.peerId.toString()} \\(stopped at byte \\d+ of \\d+: `));
});

test('a stop while the run’s dataset is fetched is a stop, not a failed fetch: runDataset rejects with the signal’s reason, the shards stored so far kept; a restart fetches the rest', { timeout: 120_000 }, async (t) => {
  const [holder, newcomer] = await peers(t, 2);
  const info = await found(holder!);
  assert.ok(info.shardCount >= 3, `${info.shardCount} shards`);
  // slow enough that the stop comes with shards still to fetch
  await serve(t, holder!, { uploadBytesPerSecond: 8 * 1024, chunkBytes: 1024 });
  const stop = new AbortController();
  const held = () => new DatasetStore(newcomer!.store.db).byDatasetId(info.datasetId!)?.shardCount ?? 0;
  const options = { node: newcomer!.node, store: newcomer!.store, dataDir: newcomer!.dataDir, log: quiet, data: { datasetId: info.datasetId!, tokenizerSha256: info.tokenizerHash } };
  const fetching = runDataset({ ...options, signal: stop.signal }).then(
    () => undefined,
    (e: unknown) => e,
  );
  await waitFor('a first shard stored', () => held() >= 1, 60_000);
  stop.abort();
  const err = await fetching;
  // the CLI stops on its signal's reason ("stopped while starting"); a RunDataError would tell the volunteer the swarm failed
  assert.equal(err, stop.signal.reason, String(err));
  assert.ok(held() >= 1 && held() < info.shardCount, `${held()} of ${info.shardCount} shards kept`);

  // restarted (no --cache-quota: it holds the whole dataset): it fetches what is missing, not train on the part for good
  const { log, lines } = capturingLogger();
  const restarted = await runDataset({ ...options, log });
  assert.equal(restarted.shardCount, info.shardCount);
  assert.equal(restarted.examples, info.examples);
  assert.ok(lines.some((l) => /holding \d+ of the \d+ shards of the run's dataset .*: fetching the rest/.test(l)), lines.join('\n'));
});

test('a fetched shard found corrupt in the cache is dropped with a warning as training reads it, and the next fetch gets it again from a holder', async (t) => {
  const [holder, peer] = await peers(t, 2);
  const info = await found(holder!);
  await serve(t, holder!);
  const fetched = await fetchDataset(peer!.node, peer!.store, { datasetId: info.datasetId!, dataDir: peer!.dataDir, log: quiet });
  const { cacheKey } = fetched.info;
  // bit rot in one cached shard, its sha256 row kept: what a fetch compares
  const [victim] = shardBytes(peer!.store, cacheKey);
  const [sha256, data] = victim!;
  data[0]! ^= 0xff;
  peer!.store.db.prepare('UPDATE shards SET data = ? WHERE sha256 = ?').run(data, sha256);

  const warnings: string[] = [];
  const stream = openBatchStream({ store: peer!.store, cacheKey, batchSize: 16, seed: 1, peerId: peer!.node.peerId.toString(), worker: false, onWarning: (w) => warnings.push(w) });
  // a whole pass over the shards
  for (let i = 0; i <= Math.ceil(info.examples / 16); i++) {
    const batch = await stream.next();
    assert.ok(!batch.done);
    checkBatch(batch.value, info.vocabSize);
  }
  await stream.close();
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, /sha256 mismatch.*; dropped, to be fetched again from the swarm/);
  assert.equal(shardBytes(peer!.store, cacheKey).has(sha256), false, 'the corrupt shard is gone');

  const again = await fetchDataset(peer!.node, peer!.store, { datasetId: info.datasetId!, dataDir: peer!.dataDir, log: quiet });
  assert.deepEqual([again.fetched, again.alreadyHeld], [1, info.shardCount - 1]);
  assert.deepEqual(shardBytes(peer!.store, cacheKey), shardBytes(holder!.store, info.cacheKey), 'every shard as the holder has it');
});

test('a peer cannot make a holder buffer a 4 MiB frame as a request: a shards stream whose frame claims more than a request is reset at once', { timeout: 60_000 }, async (t) => {
  const [holder, stranger] = await peers(t, 2);
  await serve(t, holder!);
  // a blob chunk's frame length, then all but its last byte: 32 such streams per connection, each
  // waiting up to the 10 s request idle time, would keep 128 MiB of a holder's memory
  const hostile = await stranger!.node.dial(holder!.node.peerId.toString(), SHARDS_PROTOCOL, { allowRelayed: false });
  await sendAllButLastByte(hostile, MAX_SHARD_FRAME_BYTES - 1);
  // a request answered on the same connection after those bytes: the holder has handled them by then
  const framed = new FramedStream(await stranger!.node.dial(holder!.node.peerId.toString(), SHARDS_PROTOCOL, { allowRelayed: false }), MAX_SHARD_FRAME_BYTES, 'shards');
  await framed.write({ t: 'manifest', datasetId: '0'.repeat(64) });
  const reply = await framed.expect(manifestReplySchema, AbortSignal.timeout(15_000), 'an answer');
  assert.equal(reply.t === 'refused' && reply.code, 'NOT_FOUND');
  assert.notEqual(hostile.status, 'open', 'the stream was reset, not held open for its frame');
});

test('a holder of another Cohort release (another shards protocol version) is named once and not dialed again for the fetch', async (t) => {
  const [old, newcomer] = await peers(t, 2);
  const info = await found(old!);
  // it advertises its shards but speaks only the previous version
  await old!.node.handle('shards/1.3.0', (stream) => void stream.close());
  await holdingsOf(old!.node).store(holdingKey(info.datasetId!), '', { shards: info.shardCount, have: encodeBits(Array.from({ length: info.shardCount }, () => true)) }, Date.now() + 60_000);
  const node = newcomer!.node as { dial: SwarmNode['dial'] };
  const dial = node.dial;
  let shardDials = 0;
  node.dial = (peer, suffix, options) => {
    if (suffix === SHARDS_PROTOCOL) shardDials++;
    return dial(peer, suffix, options);
  };
  const { warnings, log } = warningLog();
  const started = Date.now();
  const err = await fetchDataset(newcomer!.node, newcomer!.store, { datasetId: info.datasetId!, dataDir: newcomer!.dataDir, waitForHolderMs: 4000, log }).then(() => undefined, (e: unknown) => e as Error);
  const oldId = old!.node.peerId.toString();
  const why = `${oldId} does not speak /cohort/shards-test/${SHARDS_PROTOCOL}: it runs another Cohort release`;
  assert.ok(err?.message.includes(`no peer serves dataset ${info.datasetId!}`) && err.message.includes(why), String(err));
  assert.equal(warnings.filter((w) => w.includes(`skipping shard holder ${oldId} for this fetch: ${why}`)).length, 1, warnings.join('\n'));
  assert.equal(shardDials, 1, `dialed once in ${Date.now() - started} ms, not every second`);
});
