import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Database } from 'better-sqlite3';
import { datasetIdOf } from '../store/dataset-id.js';
import type { SopExample } from './examples.js';
import { ShardFormatError, decodeShard, encodeShard, type ShardView } from './shard-format.js';
import { firstFileWithSha256, keptTokenizerFile } from './tokenizer.js';

/** Build parameters that change the examples: part of the cache key. */
export interface BuildParams {
  readonly maxSeqLen: number;
  readonly shortSeqProb: number;
  readonly seed: number;
  readonly format: string;
  readonly field: string;
  readonly maxDocuments: number | null;
}

export interface DatasetInfo {
  readonly cacheKey: string;
  readonly source: string;
  readonly datasetHash: string;
  /** sha256 of the tokenizer.json bytes. */
  readonly tokenizerHash: string;
  readonly tokenizerFile: string;
  readonly params: BuildParams;
  /** Content identity (dataset-id.ts): what peers compare; null until the dataset is complete. */
  readonly datasetId: string | null;
  /** Fetched from the swarm: the manifest (JSON, src/shards) it was fetched by; it may hold only some of its shards. */
  readonly manifest: string | null;
  readonly vocabSize: number;
  readonly documents: number;
  readonly sentences: number;
  readonly examples: number;
  readonly tokens: number;
  readonly shardCount: number;
  readonly complete: boolean;
  readonly bytes: number;
  readonly createdAt: number;
  readonly lastUsedAt: number;
}

export interface ReadCursor {
  readonly epoch: number;
  readonly shardPos: number;
  readonly examplePos: number;
  readonly examplesRead: number;
}

export function cacheKeyOf(datasetHash: string, tokenizerId: string, params: BuildParams): string {
  return createHash('sha256').update(`${datasetHash}\0${tokenizerId}\0${JSON.stringify(params)}`).digest('hex').slice(0, 32);
}

/** A `datasets` row as SELECT_DATASET names its columns: DatasetInfo but for the three it stores as JSON text, 0/1 and a nullable sum. */
type DatasetRow = Omit<DatasetInfo, 'params' | 'complete' | 'bytes'> & { params: string; complete: number; bytes: number | null };

const SELECT_DATASET = `SELECT d.cache_key AS cacheKey, d.source, d.dataset_hash AS datasetHash, d.tokenizer_hash AS tokenizerHash, d.tokenizer_file AS tokenizerFile, d.params,
  d.dataset_id AS datasetId, d.manifest, d.vocab_size AS vocabSize, d.documents, d.sentences, d.examples, d.tokens, d.shard_count AS shardCount, d.complete,
  (SELECT sum(length(data)) FROM shards s WHERE s.cache_key = d.cache_key) AS bytes, d.created_at AS createdAt, d.last_used_at AS lastUsedAt FROM datasets d`;

/** The data pipeline's tables in the store: datasets, their shards and the peers' read cursors. */
export class DatasetStore {
  /** Old rows' relative tokenizer paths, resolved once per store (see resolveTokenizerFile). */
  private readonly resolvedTokenizers = new Map<string, string>();

  constructor(private readonly db: Database) {}

  get(cacheKey: string): DatasetInfo | undefined {
    const row = this.db.prepare(`${SELECT_DATASET} WHERE d.cache_key = ?`).get(cacheKey) as DatasetRow | undefined;
    return row && this.toInfo(row);
  }

  /** Complete datasets, most recently used first. */
  list(): DatasetInfo[] {
    return (this.db.prepare(`${SELECT_DATASET} WHERE d.complete = 1 ORDER BY d.last_used_at DESC, d.created_at DESC`).all() as DatasetRow[]).map((r) => this.toInfo(r));
  }

  /** A tokenizer.json with this sha256 (and its bytes) that a dataset here uses or `dataDir` keeps, if any: firstFileWithSha256. */
  localTokenizer(sha256: string, dataDir: string): ReturnType<typeof firstFileWithSha256> {
    return firstFileWithSha256([...this.list().filter((d) => d.tokenizerHash === sha256).map((d) => d.tokenizerFile), keptTokenizerFile(dataDir, sha256)], sha256);
  }

  /** Cache keys of prepared datasets whose build has not finished (not fetched ones: those have a manifest). */
  unfinishedBuilds(): string[] {
    return this.db.prepare('SELECT cache_key FROM datasets WHERE complete = 0 AND manifest IS NULL').pluck().all() as string[];
  }

  /** Starts (or restarts) a build: any earlier incomplete build of the key and its shards are removed first. */
  begin(info: Pick<DatasetInfo, 'cacheKey' | 'source' | 'datasetHash' | 'tokenizerHash' | 'tokenizerFile' | 'params' | 'vocabSize'>, now = Date.now()): void {
    this.db.transaction(() => {
      this.remove(info.cacheKey);
      this.db
        .prepare(`INSERT INTO datasets (cache_key, source, dataset_hash, tokenizer_hash, tokenizer_file, params, vocab_size, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
        .run(info.cacheKey, info.source, info.datasetHash, info.tokenizerHash, info.tokenizerFile, JSON.stringify(info.params), info.vocabSize, now, now);
    })();
  }

  /** Writes one shard in its own transaction, so an interrupted build never leaves a half-written row. */
  writeShard(cacheKey: string, seq: number, examples: readonly SopExample[], vocabSize: number, now = Date.now()): { bytes: number; tokens: number } {
    const { data, tokens } = encodeShard(examples, vocabSize);
    const sha = createHash('sha256').update(data).digest('hex');
    this.db
      .prepare(`INSERT INTO shards (cache_key, seq, examples, tokens, data, sha256, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(cacheKey, seq, examples.length, tokens, data, sha, now, now);
    return { bytes: data.length, tokens };
  }

  /** Marks a build complete with its totals and content identity; only complete datasets are reused or read. */
  finish(cacheKey: string, stats: { documents: number; sentences: number; examples: number; tokens: number; shardCount: number }): void {
    const row = this.db.prepare('SELECT params, tokenizer_hash FROM datasets WHERE cache_key = ?').get(cacheKey) as { params: string; tokenizer_hash: string } | undefined;
    if (!row) throw new Error(`dataset ${cacheKey}: finish() without begin()`);
    const params = JSON.parse(row.params) as BuildParams;
    const shards = this.db.prepare('SELECT sha256 FROM shards WHERE cache_key = ? ORDER BY seq').pluck().all(cacheKey) as string[];
    const datasetId = datasetIdOf({ maxSeqLen: params.maxSeqLen, shortSeqProb: params.shortSeqProb, tokenizerSha256: row.tokenizer_hash }, shards);
    this.db
      .prepare(`UPDATE datasets SET documents = ?, sentences = ?, examples = ?, tokens = ?, shard_count = ?, dataset_id = ?, complete = 1 WHERE cache_key = ?`)
      .run(stats.documents, stats.sentences, stats.examples, stats.tokens, stats.shardCount, datasetId, cacheKey);
  }

  /**
   * Starts (or continues) a dataset fetched from the swarm: its identity and manifest come from the
   * run, not from its shards (it may hold only some). Readable once `refreshFetched` counted a shard.
   */
  beginFetched(info: Pick<DatasetInfo, 'cacheKey' | 'source' | 'tokenizerHash' | 'tokenizerFile' | 'params' | 'vocabSize'> & { datasetId: string; manifest: string }, now = Date.now()): void {
    this.db
      .prepare(
        `INSERT INTO datasets (cache_key, source, dataset_hash, tokenizer_hash, tokenizer_file, params, vocab_size, dataset_id, manifest, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (cache_key) DO NOTHING`,
      )
      .run(info.cacheKey, info.source, `swarm:${info.datasetId}`, info.tokenizerHash, info.tokenizerFile, JSON.stringify(info.params), info.vocabSize, info.datasetId, info.manifest, now, now);
  }

  /** Replaces a fetched dataset's manifest (one its shards' bytes showed forged, by the one that matched them). */
  replaceManifest(cacheKey: string, manifest: string): void {
    this.db.prepare('UPDATE datasets SET manifest = ? WHERE cache_key = ?').run(manifest, cacheKey);
  }

  /**
   * Stores a shard received from a peer (already verified by the caller against its sha256) and
   * recounts the dataset, in one transaction: after a crash the shard is stored and counted, or neither.
   */
  putShard(cacheKey: string, seq: number, shard: { data: Uint8Array; examples: number; tokens: number; sha256: string }, now = Date.now()): void {
    this.db.transaction(() => {
      this.db
        .prepare(`INSERT OR REPLACE INTO shards (cache_key, seq, examples, tokens, data, sha256, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
        .run(cacheKey, seq, shard.examples, shard.tokens, shard.data, shard.sha256, now, now);
      this.refreshFetched(cacheKey);
    })();
  }

  /**
   * Bytes of each shard held (seq → bytes). Cheap where shardEntries is not: a row's sha256 is stored
   * after its blob, so reading it walks the blob's overflow pages, where length() reads only the header.
   */
  shardSizes(cacheKey: string): Map<number, number> {
    const rows = this.db.prepare('SELECT seq, length(data) AS bytes FROM shards WHERE cache_key = ?').all(cacheKey) as { seq: number; bytes: number }[];
    return new Map(rows.map((r) => [r.seq, r.bytes]));
  }

  /** Drops one shard of a fetched dataset (a peer within its cache quota, done with it) and recounts the dataset. */
  dropShard(cacheKey: string, seq: number): void {
    this.db.prepare('DELETE FROM shards WHERE cache_key = ? AND seq = ?').run(cacheKey, seq);
    this.refreshFetched(cacheKey);
  }

  /** Recounts a fetched dataset's totals from the shards it holds; it is readable (complete) once it holds one. */
  refreshFetched(cacheKey: string): void {
    this.db
      .prepare(
        `UPDATE datasets SET (examples, tokens, shard_count, complete) = (SELECT coalesce(sum(examples), 0), coalesce(sum(tokens), 0), count(*), count(*) > 0 FROM shards WHERE cache_key = ?) WHERE cache_key = ?`,
      )
      .run(cacheKey, cacheKey);
  }

  /** Per shard of a dataset, in order: what a manifest lists. */
  shardEntries(cacheKey: string): { seq: number; sha256: string; examples: number; tokens: number; bytes: number }[] {
    return this.db.prepare('SELECT seq, sha256, examples, tokens, length(data) AS bytes FROM shards WHERE cache_key = ? ORDER BY seq').all(cacheKey) as {
      seq: number;
      sha256: string;
      examples: number;
      tokens: number;
      bytes: number;
    }[];
  }

  /** A shard's bytes by content (any dataset), or undefined. */
  shardBySha256(sha256: string): Buffer | undefined {
    return this.db.prepare('SELECT data FROM shards WHERE sha256 = ? LIMIT 1').pluck().get(sha256) as Buffer | undefined;
  }

  /** The complete dataset with this content identity, if this store holds one. */
  byDatasetId(datasetId: string): DatasetInfo | undefined {
    const row = this.db.prepare(`${SELECT_DATASET} WHERE d.dataset_id = ? AND d.complete = 1 ORDER BY d.last_used_at DESC`).get(datasetId) as DatasetRow | undefined;
    return row && this.toInfo(row);
  }

  remove(cacheKey: string): void {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM shards WHERE cache_key = ?').run(cacheKey);
      this.db.prepare('DELETE FROM data_cursors WHERE cache_key = ?').run(cacheKey);
      this.db.prepare('DELETE FROM datasets WHERE cache_key = ?').run(cacheKey);
    })();
  }

  touch(cacheKey: string, now = Date.now()): void {
    this.db.prepare('UPDATE datasets SET last_used_at = ? WHERE cache_key = ?').run(now, cacheKey);
  }

  shardSeqs(cacheKey: string): number[] {
    return (this.db.prepare('SELECT seq FROM shards WHERE cache_key = ? ORDER BY seq').all(cacheKey) as { seq: number }[]).map((r) => r.seq);
  }

  /**
   * Reads and verifies one shard. A row whose sha256 or lengths do not match is reported as
   * `{ corrupt: reason }` so the reader can skip it with a warning instead of crashing.
   */
  readShard(cacheKey: string, seq: number, now = Date.now()): ShardView | { corrupt: string; missing?: true } {
    const row = this.db.prepare('SELECT examples, tokens, data, sha256 FROM shards WHERE cache_key = ? AND seq = ?').get(cacheKey, seq) as
      | { examples: number; tokens: number; data: Buffer; sha256: string }
      | undefined;
    if (!row) return { corrupt: `shard ${seq} of ${cacheKey} is missing`, missing: true };
    const sha = createHash('sha256').update(row.data).digest('hex');
    if (sha !== row.sha256) return { corrupt: `shard ${seq} of ${cacheKey}: sha256 mismatch (stored ${row.sha256.slice(0, 12)}…, computed ${sha.slice(0, 12)}…)` };
    try {
      const view = decodeShard(row.data, row.examples, row.tokens);
      this.db.prepare('UPDATE shards SET last_used_at = ? WHERE cache_key = ? AND seq = ?').run(now, cacheKey, seq);
      return view;
    } catch (err) {
      if (err instanceof ShardFormatError) return { corrupt: `shard ${seq} of ${cacheKey}: ${err.message}` };
      throw err;
    }
  }

  getCursor(cacheKey: string, peerId: string, seed: number): ReadCursor | undefined {
    return this.db
      .prepare('SELECT epoch, shard_pos AS shardPos, example_pos AS examplePos, examples_read AS examplesRead FROM data_cursors WHERE cache_key = ? AND peer_id = ? AND seed = ?')
      .get(cacheKey, peerId, seed) as ReadCursor | undefined;
  }

  setCursor(cacheKey: string, peerId: string, seed: number, c: ReadCursor, now = Date.now()): void {
    this.db
      .prepare(
        `INSERT INTO data_cursors (cache_key, peer_id, seed, epoch, shard_pos, example_pos, examples_read, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (cache_key, peer_id, seed) DO UPDATE SET epoch = excluded.epoch, shard_pos = excluded.shard_pos, example_pos = excluded.example_pos, examples_read = excluded.examples_read, updated_at = excluded.updated_at`,
      )
      .run(cacheKey, peerId, seed, c.epoch, c.shardPos, c.examplePos, c.examplesRead, now);
  }

  /** Bytes of shard data over all datasets. */
  totalBytes(): number {
    return (this.db.prepare('SELECT coalesce(sum(length(data)), 0) AS n FROM shards').get() as { n: number }).n;
  }

  /**
   * Evicts whole datasets, least recently used first, until the shards fit in `quotaBytes`; `keep` is
   * never evicted, nor a build in progress (another process's: one abandoned is removed by the next
   * prepare). Returns the evicted cache keys. A dataset is evicted whole: a partial one is useless.
   */
  evictToQuota(quotaBytes: number, keep: string): string[] {
    const evicted: string[] = [];
    let total = this.totalBytes();
    const candidates = this.db
      .prepare(`${SELECT_DATASET} WHERE d.cache_key != ? AND NOT (d.complete = 0 AND d.manifest IS NULL) ORDER BY d.last_used_at ASC, d.created_at ASC`)
      .all(keep) as DatasetRow[];
    for (const row of candidates) {
      if (total <= quotaBytes) break;
      this.remove(row.cacheKey);
      total -= row.bytes ?? 0;
      evicted.push(row.cacheKey);
    }
    return evicted;
  }

  private toInfo(row: DatasetRow): DatasetInfo {
    return { ...row, tokenizerFile: this.tokenizerFileOf(row), params: JSON.parse(row.params) as BuildParams, complete: row.complete === 1, bytes: row.bytes ?? 0 };
  }

  /** A row's tokenizer file as an absolute path; a relative one (a dataset prepared before paths were stored absolute) is resolved once per store. */
  private tokenizerFileOf(row: Pick<DatasetRow, 'tokenizerFile' | 'tokenizerHash'>): string {
    if (path.isAbsolute(row.tokenizerFile)) return row.tokenizerFile;
    const key = `${row.tokenizerHash}\0${row.tokenizerFile}`;
    let file = this.resolvedTokenizers.get(key);
    // cohort.db lies at the top of its data directory
    if (file === undefined) this.resolvedTokenizers.set(key, (file = resolveTokenizerFile(row.tokenizerFile, row.tokenizerHash, path.dirname(this.db.name))));
    return file;
  }
}

/**
 * An old row's relative tokenizer path: relative to the folder `cohort data prepare --data-dir REL` ran
 * in, `REL/data/<x>-wordpiece-<N>/tokenizer.json` or `REL/data/tokenizers/<sha256>.json`; never from
 * the current folder, which may hold another file there. The first of its place in this data
 * directory and this directory's copy by sha256 whose bytes have the dataset's tokenizer sha256; if
 * neither has, its place (loading it then fails naming it and the sha256: datasetTokenizer).
 */
function resolveTokenizerFile(stored: string, sha256: string, dataDir: string): string {
  const parts = stored.split(/[\\/]/);
  const at = parts.lastIndexOf('data');
  const inDataDir = at >= 0 && at === parts.length - 3 ? path.resolve(dataDir, ...parts.slice(at)) : keptTokenizerFile(dataDir, sha256);
  return firstFileWithSha256([inDataDir, keptTokenizerFile(dataDir, sha256)], sha256)?.file ?? inDataDir;
}
