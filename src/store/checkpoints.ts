import { createHash } from 'node:crypto';
import type { Database } from 'better-sqlite3';
import { CheckpointCorruptError } from './errors.js';

/**
 * Chunk size of stored checkpoint blobs. Each chunk passes through three buffers of its size (ours,
 * SQLite's copy of the bound blob, the record it builds). At 4 MiB, glibc served those from the
 * saving thread's malloc arena once its dynamic mmap threshold had risen past them (after the first
 * such buffer was freed), and the arena kept 7–9 MB more after every full-state save: ≈ 90 MB/h at
 * the default 5-minute saves (docs/swarm.md). At 256 KiB the arena grew half as much per save.
 */
export const CHECKPOINT_CHUNK_BYTES = 256 * 1024;

/**
 * Bytes saveChunked commits at a time (32 MiB): each commit of the rollback-journaled checkpoint file
 * costs fsyncs, and while one is being written a reader of the file (another process listing
 * checkpoints) waits for it.
 */
export const CHECKPOINT_COMMIT_CHUNKS = (32 * 1024 * 1024) / CHECKPOINT_CHUNK_BYTES;

/** Kind prefix of a chunked save still being written (saveChunked). */
const PARTIAL_PREFIX = 'partial:';

export interface CheckpointInfo {
  readonly id: number;
  readonly kind: string;
  readonly epoch: number;
  readonly createdAt: number;
  readonly size: number;
  readonly sha256: string;
  readonly meta: Record<string, unknown>;
}

export interface SaveCheckpoint {
  /** What the bytes are, e.g. `model` (safetensors) or `optimizer`. */
  readonly kind: string;
  readonly epoch: number;
  readonly meta?: Record<string, unknown>;
  /** The bytes, whole or as a sequence of pieces (they are re-chunked). */
  readonly data: Uint8Array | Iterable<Uint8Array>;
  /** Keep at most this many checkpoints of this kind (oldest are deleted in the same transaction). */
  readonly keep?: number;
  /** saveChunked: called after each commit of chunks with how many are committed (the test fault that pauses a save mid-write). */
  readonly onChunk?: (written: number) => void;
}

/** How messages name a checkpoint: `checkpoint 7 (state, epoch 3)`. */
export function checkpointName({ id, kind, epoch }: Pick<CheckpointInfo, 'id' | 'kind' | 'epoch'>): string {
  return `checkpoint ${id} (${kind}, epoch ${epoch})`;
}

/** A `checkpoints` row as SELECT_CHECKPOINT names its columns. */
type Row = Omit<CheckpointInfo, 'meta'> & { meta: string; chunkCount: number };
const SELECT_CHECKPOINT = 'SELECT id, kind, epoch, created_at AS createdAt, size, sha256, meta, chunk_count AS chunkCount FROM checkpoints';

/**
 * Checkpoints as chunked blobs with a SHA-256, in their own file (checkpoint-database.ts). A save is
 * one SQLite transaction, so a process killed mid-save leaves the previous checkpoints exactly as
 * they were.
 */
export class CheckpointStore {
  constructor(
    /** The connection to the checkpoint file (not the store's main database). */
    readonly db: Database,
    readonly file: string,
  ) {}

  save(checkpoint: SaveCheckpoint): CheckpointInfo {
    const createdAt = Date.now();
    const meta = checkpoint.meta ?? {};
    const insertChunk = this.db.prepare('INSERT INTO checkpoint_chunks (checkpoint_id, seq, data) VALUES (?, ?, ?)');
    const run = this.db.transaction((): CheckpointInfo => {
      const id = Number(
        this.db
          .prepare("INSERT INTO checkpoints (kind, epoch, created_at, size, sha256, chunk_count, meta) VALUES (?, ?, ?, 0, '', 0, ?)")
          .run(checkpoint.kind, checkpoint.epoch, createdAt, JSON.stringify(meta)).lastInsertRowid,
      );
      const hash = createHash('sha256');
      let size = 0;
      let seq = 0;
      for (const chunk of rechunk(checkpoint.data, CHECKPOINT_CHUNK_BYTES)) {
        hash.update(chunk);
        insertChunk.run(id, seq++, chunk);
        size += chunk.byteLength;
      }
      const sha256 = hash.digest('hex');
      this.db.prepare('UPDATE checkpoints SET size = ?, sha256 = ?, chunk_count = ? WHERE id = ?').run(size, sha256, seq, id);
      if (checkpoint.keep !== undefined) this.prune(checkpoint.kind, checkpoint.keep);
      return { id, kind: checkpoint.kind, epoch: checkpoint.epoch, createdAt, size, sha256, meta };
    });
    return run();
  }

  /**
   * Saves like `save`, but commits CHECKPOINT_COMMIT_CHUNKS chunks at a time, so a large checkpoint
   * never holds the file's lock for long (another connection may list or load meanwhile). The chunks
   * are written under a staging row of kind `partial:<kind>` that `list`/`load` never return; one last
   * small transaction gives the row its kind, size and hash (and prunes). A process killed before that
   * leaves the previous checkpoints as they were and a staging row (the open commit rolled back), which
   * the next chunked save of the kind deletes.
   */
  saveChunked(checkpoint: SaveCheckpoint): CheckpointInfo {
    const createdAt = Date.now();
    const meta = checkpoint.meta ?? {};
    const staging = PARTIAL_PREFIX + checkpoint.kind;
    this.dropStaged(staging);
    const id = Number(
      this.db
        .prepare("INSERT INTO checkpoints (kind, epoch, created_at, size, sha256, chunk_count, meta) VALUES (?, ?, ?, 0, '', 0, ?)")
        .run(staging, checkpoint.epoch, createdAt, JSON.stringify(meta)).lastInsertRowid,
    );
    const insertChunk = this.db.prepare('INSERT INTO checkpoint_chunks (checkpoint_id, seq, data) VALUES (?, ?, ?)');
    const hash = createHash('sha256');
    let size = 0;
    let seq = 0;
    const chunks = rechunk(checkpoint.data, CHECKPOINT_CHUNK_BYTES);
    const commitSome = this.db.transaction((): boolean => {
      for (let i = 0; i < CHECKPOINT_COMMIT_CHUNKS; i++) {
        const next = chunks.next();
        if (next.done) return false;
        hash.update(next.value);
        insertChunk.run(id, seq++, next.value);
        size += next.value.byteLength;
      }
      return true;
    });
    for (let more = true; more; ) {
      more = commitSome();
      checkpoint.onChunk?.(seq);
    }
    const sha256 = hash.digest('hex');
    this.db.transaction(() => {
      this.db.prepare('UPDATE checkpoints SET kind = ?, size = ?, sha256 = ?, chunk_count = ? WHERE id = ?').run(checkpoint.kind, size, sha256, seq, id);
      // pruned ones go back to staging (hidden at once), their chunks are deleted below a few at a time
      if (checkpoint.keep !== undefined) {
        this.db
          .prepare('UPDATE checkpoints SET kind = ? WHERE kind = ? AND id NOT IN (SELECT id FROM checkpoints WHERE kind = ? ORDER BY id DESC LIMIT ?)')
          .run(staging, checkpoint.kind, checkpoint.kind, Math.max(0, checkpoint.keep));
      }
    })();
    this.dropStaged(staging);
    return { id, kind: checkpoint.kind, epoch: checkpoint.epoch, createdAt, size, sha256, meta };
  }

  /** Deletes the checkpoints of a staging kind, a few chunks per transaction (deleting a large one at once would hold the write lock as long as writing it). */
  private dropStaged(staging: string): void {
    const ids = this.db.prepare('SELECT id FROM checkpoints WHERE kind = ?').pluck().all(staging) as number[];
    const batch = this.db.prepare('DELETE FROM checkpoint_chunks WHERE rowid IN (SELECT rowid FROM checkpoint_chunks WHERE checkpoint_id = ? LIMIT 4)');
    for (const id of ids) {
      while (batch.run(id).changes > 0);
      this.db.prepare('DELETE FROM checkpoints WHERE id = ?').run(id);
    }
  }

  /** Newest first; chunked saves still being written are left out. */
  list(kind?: string): CheckpointInfo[] {
    const rows = (kind === undefined
      ? this.db.prepare(`${SELECT_CHECKPOINT} WHERE kind NOT LIKE ? ORDER BY id DESC`).all(`${PARTIAL_PREFIX}%`)
      : this.db.prepare(`${SELECT_CHECKPOINT} WHERE kind = ? ORDER BY id DESC`).all(kind)) as Row[];
    return rows.map(toInfo);
  }

  /** Reads and verifies one checkpoint; throws CheckpointCorruptError if chunks are missing or the hash differs. */
  load(id: number): { info: CheckpointInfo; data: Buffer } {
    const row = this.db.prepare(`${SELECT_CHECKPOINT} WHERE id = ?`).get(id) as Row | undefined;
    if (!row) throw new CheckpointCorruptError(this.file, `checkpoint ${id} does not exist in ${this.file}`);
    // read chunk by chunk into one buffer of the stored size, hashing as it goes (no second copy)
    const data = Buffer.allocUnsafe(row.size);
    const hash = createHash('sha256');
    let count = 0;
    let inOrder = true;
    let bytes = 0;
    for (const c of this.db.prepare('SELECT seq, data FROM checkpoint_chunks WHERE checkpoint_id = ? ORDER BY seq').iterate(id) as Iterable<{ seq: number; data: unknown }>) {
      // a row overwritten with text, a number or NULL (a damaged page, a hand edit): its length means nothing
      if (!Buffer.isBuffer(c.data)) throw new CheckpointCorruptError(this.file, `${checkpointName(row)} is damaged: chunk ${c.seq} holds ${c.data === null ? 'NULL' : typeof c.data === 'string' ? 'text' : 'a number'}, not bytes`);
      inOrder &&= c.seq === count++;
      if (inOrder && bytes + c.data.byteLength <= row.size) {
        data.set(c.data, bytes);
        hash.update(c.data);
      }
      bytes += c.data.byteLength;
    }
    if (count !== row.chunkCount || !inOrder) {
      throw new CheckpointCorruptError(this.file, `${checkpointName(row)} has ${count} of ${row.chunkCount} chunks`);
    }
    const sha256 = bytes === row.size ? hash.digest('hex') : `${bytes} bytes instead of ${row.size}`;
    if (bytes !== row.size || sha256 !== row.sha256) {
      throw new CheckpointCorruptError(this.file, `${checkpointName(row)} fails its checksum: expected ${row.sha256}, got ${sha256}`);
    }
    return { info: toInfo(row), data };
  }

  /**
   * The newest checkpoint of `kind` that verifies. Damaged newer ones are skipped and reported
   * through `onSkip`, never deleted, so nothing is lost silently.
   */
  loadLatest(kind: string, onSkip?: (err: CheckpointCorruptError) => void): { info: CheckpointInfo; data: Buffer } | undefined {
    const found = this.loadNewestReadable(this.list(kind), () => undefined, (_, err) => {
      if (!(err instanceof CheckpointCorruptError)) throw err;
      onSkip?.(err);
    });
    return found && { info: found.info, data: found.data };
  }

  /**
   * The first of `candidates` (newest first, as `list` gives them) that verifies and that `decode`
   * accepts, with what it decoded. A damaged one (its checksum, or its contents, fail) is skipped and
   * reported through `onSkip` as `skipping checkpoint 7 (state, epoch 3): why`, never deleted: an
   * older one stands in. What `onSkip` throws ends the walk (loadLatest's, for a failure other than damage).
   */
  loadNewestReadable<T>(candidates: Iterable<CheckpointInfo>, decode: (data: Buffer, info: CheckpointInfo) => T, onSkip: (message: string, err: Error) => void): { info: CheckpointInfo; data: Buffer; decoded: T } | undefined {
    for (const info of candidates) {
      try {
        const { data } = this.load(info.id);
        return { info, data, decoded: decode(data, info) };
      } catch (err) {
        onSkip(`skipping ${checkpointName(info)}: ${(err as Error).message}`, err as Error);
      }
    }
    return undefined;
  }

  /** Deletes all but the newest `keep` checkpoints of `kind`; returns how many were deleted. */
  prune(kind: string, keep: number): number {
    return this.db
      .prepare('DELETE FROM checkpoints WHERE kind = ? AND id NOT IN (SELECT id FROM checkpoints WHERE kind = ? ORDER BY id DESC LIMIT ?)')
      .run(kind, kind, Math.max(0, keep)).changes;
  }
}

function toInfo({ chunkCount: _, ...row }: Row): CheckpointInfo {
  return { ...row, meta: JSON.parse(row.meta) as Record<string, unknown> };
}

/**
 * Re-cuts a byte sequence into pieces of exactly `size` bytes (the last may be shorter), copied into
 * one buffer that each piece reuses: a piece is valid until the next one is asked for (the callers
 * hash and insert it first; SQLite copies what it binds).
 */
function* rechunk(data: Uint8Array | Iterable<Uint8Array>, size: number): Generator<Uint8Array> {
  const pieces = data instanceof Uint8Array ? [data] : data;
  const chunk = Buffer.allocUnsafe(data instanceof Uint8Array ? Math.min(size, data.byteLength) : size);
  let filled = 0;
  for (const piece of pieces) {
    for (let offset = 0; offset < piece.byteLength; ) {
      const take = Math.min(size - filled, piece.byteLength - offset);
      chunk.set(piece.subarray(offset, offset + take), filled);
      filled += take;
      offset += take;
      if (filled === size) {
        yield chunk;
        filled = 0;
      }
    }
  }
  if (filled > 0) yield chunk.subarray(0, filled);
}
