import type { AlbertBatch } from '../engine/batch.js';
import type { DatasetStore, ReadCursor } from './dataset-store.js';
import { DataError } from './errors.js';
import { buildBatch, type MaskingOptions, type RowSource, type VocabInfo } from './masking.js';
import { Prng } from './prng.js';
import type { ShardView } from './shard-format.js';

export interface ProducerInit {
  readonly cacheKey: string;
  readonly batchSize: number;
  readonly seqLen: number;
  readonly seed: number;
  readonly peerId: string;
  readonly vocab: VocabInfo;
  readonly masking: MaskingOptions;
  /** Where to continue (the persisted cursor); the start of epoch 0 when absent. */
  readonly start?: ReadCursor;
}

export interface ProducedBatch {
  readonly batch: AlbertBatch;
  /** The read position after this batch: persist it once the batch is trained on. */
  readonly cursor: ReadCursor;
  /** Corrupt shards skipped while filling this batch. */
  readonly warnings: readonly string[];
  /** Shards (seq) whose last example of this pass is in this batch: trained on once the batch is. */
  readonly finished: readonly number[];
}

/**
 * Walks a dataset's shards in this peer's own order (a permutation per epoch seeded by peer id and
 * seed, and a permutation of examples within each shard) and builds masked batches. Everything random
 * derives from the position, so a restart from a persisted cursor continues exactly where it stopped.
 * Each pass (epoch) is over the shards held when it starts: a peer within a cache quota drops shards
 * it trained on and fetches others meanwhile (src/shards/rotation.ts), and one dropped before this
 * pass reaches it is passed over.
 */
export class BatchProducer {
  private seqs: number[];
  private cursor: ReadCursor;
  private shard: { view: ShardView; order: Uint32Array } | undefined;
  private shardOrder: Uint32Array;
  /** Fetched from the swarm (it has a manifest), not prepared here. */
  private readonly fetched: boolean;
  /** Corrupt shards of a fetched dataset dropped by this producer. */
  private dropped = 0;
  /** What was wrong with the last corrupt shard met: an error that ends the stream says it (its batch's warnings are never delivered). */
  private lastCorrupt = '';

  constructor(
    private readonly datasets: DatasetStore,
    private readonly init: ProducerInit,
  ) {
    this.seqs = datasets.shardSeqs(init.cacheKey);
    this.fetched = (datasets.get(init.cacheKey)?.manifest ?? null) !== null;
    if (this.seqs.length === 0) throw new DataError(`dataset ${init.cacheKey} has no shards; run \`cohort data prepare\``);
    this.cursor = init.start ?? { epoch: 0, shardPos: 0, examplePos: 0, examplesRead: 0 };
    if (this.cursor.shardPos >= this.seqs.length) this.cursor = { ...this.cursor, epoch: this.cursor.epoch + 1, shardPos: 0, examplePos: 0 };
    this.shardOrder = this.orderFor(this.cursor.epoch);
  }

  next(): ProducedBatch {
    const { batchSize, seqLen, vocab, masking, peerId, seed } = this.init;
    const at = this.cursor;
    const rows: RowSource[] = [];
    const warnings: string[] = [];
    const finished: number[] = [];
    let emptyShards = 0;
    while (rows.length < batchSize) {
      if (!this.shard) {
        const seq = this.seqs[this.shardOrder[this.cursor.shardPos]!]!;
        const view = this.datasets.readShard(this.init.cacheKey, seq);
        if ('corrupt' in view) {
          // dropped since this pass began (cache quota, or found corrupt below): not a fault; bounded as below
          if (view.missing) {
            if (++emptyShards > this.seqs.length) throw new DataError(`dataset ${this.init.cacheKey}: none of its shards is held any more${this.dropped > 0 ? ` (${this.dropped} corrupt one(s) dropped, the last: ${this.lastCorrupt}); start again: the node fetches them from the swarm` : ''}`);
            this.advanceShard();
            continue;
          }
          // a shard fetched from the swarm is dropped, so the node's next fetch gets it again from a
          // holder; a prepared one stays for `cohort data prepare` to replace
          if (this.fetched) {
            this.datasets.dropShard(this.init.cacheKey, seq);
            this.dropped++;
          }
          warnings.push(this.fetched ? `${view.corrupt}; dropped, to be fetched again from the swarm` : view.corrupt);
          this.lastCorrupt = view.corrupt;
          // Bounded: a whole pass over the shards without one readable example is an error, not a loop.
          if (++emptyShards > this.seqs.length) throw new DataError(`dataset ${this.init.cacheKey}: no readable shard (the last: ${view.corrupt}); run \`cohort data prepare\` again`);
          this.advanceShard();
          continue;
        }
        emptyShards = 0;
        this.shard = { view, order: new Prng(`within:${peerId}:${seed}:${this.cursor.epoch}:${seq}`).permutation(view.examples) };
      }
      const { view, order } = this.shard;
      const i = order[this.cursor.examplePos]!;
      const start = view.offsets[i]!;
      const aLen = view.lengths[2 * i]!;
      rows.push({ ids: view.ids, aStart: start, aLen, bStart: start + aLen, bLen: view.lengths[2 * i + 1]!, sop: view.sop[i]! });
      this.cursor = { ...this.cursor, examplePos: this.cursor.examplePos + 1, examplesRead: this.cursor.examplesRead + 1 };
      if (this.cursor.examplePos >= view.examples) {
        finished.push(this.seqs[this.shardOrder[this.cursor.shardPos]!]!);
        this.advanceShard();
      }
    }
    const rng = new Prng(`mask:${peerId}:${seed}:${at.epoch}:${at.shardPos}:${at.examplePos}`);
    return { batch: buildBatch(rows, seqLen, vocab, rng, masking), cursor: this.cursor, warnings, finished };
  }

  private advanceShard(): void {
    this.shard = undefined;
    let { epoch, shardPos } = this.cursor;
    if (++shardPos >= this.seqs.length) {
      epoch++;
      shardPos = 0;
      // the next pass is over the shards held now
      const held = this.datasets.shardSeqs(this.init.cacheKey);
      if (held.length > 0) this.seqs = held;
      this.shardOrder = this.orderFor(epoch);
    }
    this.cursor = { ...this.cursor, epoch, shardPos, examplePos: 0 };
  }

  private orderFor(epoch: number): Uint32Array {
    return new Prng(`order:${this.init.peerId}:${this.init.seed}:${epoch}`).permutation(this.seqs.length);
  }
}
