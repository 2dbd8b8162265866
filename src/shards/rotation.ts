/**
 * A peer's share of a dataset within its cache quota (`cohort run --cache-quota`): it first holds a
 * random subset that fits (fetchDataset, seeded by its peer id, so peers hold different subsets), and
 * as it trains through that subset each shard it has trained on is dropped and the next shard of its
 * own order that it has not held this cycle is fetched in its place. So it trains through the whole
 * dataset a quota's worth at a time, and its store never holds more than the quota.
 */
import { datasetStore } from '../data/store-datasets.js';
import type { DatasetStore } from '../data/dataset-store.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import { fetchDataset, shardOrder } from './fetch.js';
import { hasBit, type Manifest } from './messages.js';
import { holdingKey, holdingsOf, manifestOf } from './server.js';

export interface RotationOptions {
  /** The fetched dataset (its cache key in this store). */
  readonly cacheKey: string;
  readonly quotaBytes: number;
  readonly dataDir: string;
  readonly log: Logger;
  /** Publishes what this store holds (the node's shard server), after each swap. */
  readonly advertise: () => Promise<void>;
  /** How long a fetch waits for a holder. @default fetchDataset's */
  readonly waitForHolderMs?: number;
}

export class ShardRotation {
  private readonly datasets: DatasetStore;
  private readonly manifest: Manifest;
  private readonly datasetId: string;
  private readonly order: Uint32Array;
  /** Shards held at some point of this cycle: the next fetched is one not among them, until all were. */
  private visited: Set<number>;
  private readonly queue: number[] = [];
  private running: Promise<void> | undefined;
  private readonly abort = new AbortController();
  /** Shards dropped (each for the next that fits) so far. */
  swapped = 0;

  constructor(
    private readonly node: SwarmNode,
    private readonly store: Store,
    private readonly o: RotationOptions,
  ) {
    this.datasets = datasetStore(store);
    const info = this.datasets.get(o.cacheKey);
    if (info?.datasetId == null) throw new RangeError(`no dataset ${o.cacheKey} with an identity in ${store.file}`);
    this.datasetId = info.datasetId;
    this.manifest = manifestOf(info, this.datasets);
    this.order = shardOrder(this.manifest, node.peerId.toString());
    this.visited = new Set(this.held().keys());
  }

  /** Shards (seq = manifest index) the trainer is done with for this pass: each is swapped for a new one, in turn. */
  trained(seqs: readonly number[]): void {
    this.queue.push(...seqs);
    this.kick();
  }

  private kick(): void {
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
      // shards queued while the last swap was finishing
      if (this.queue.length > 0 && !this.abort.signal.aborted) this.kick();
    });
  }

  /** Stops swapping (a fetch under way is abandoned; the shard it replaced stays dropped). */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  private held(): Map<number, number> {
    return this.datasets.shardSizes(this.o.cacheKey);
  }

  private async drain(): Promise<void> {
    for (let seq = this.queue.shift(); seq !== undefined && !this.abort.signal.aborted; seq = this.queue.shift()) {
      try {
        await this.swap(seq);
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.o.log.warn({ dataset: this.datasetId, shard: seq }, `cache quota: could not swap shard ${seq} of dataset ${this.datasetId.slice(0, 12)}… for another: ${(err as Error).message}; training goes on with the shards held`);
      }
    }
  }

  private async swap(seq: number): Promise<void> {
    const held = this.held();
    // already dropped, or the quota holds the whole dataset: nothing to swap
    if (!held.has(seq) || held.size === this.manifest.shards.length) return;
    if (this.unvisited(held).length === 0) this.visited = new Set(held.keys()); // every shard was held this cycle: a new one begins
    if (this.unvisited(held).length === 0) return;
    // the swarm must keep every shard: drop only one that another peer serves
    const others = [...(await holdingsOf(this.node).get(holdingKey(this.datasetId))).values()].filter((e) => e.owner !== this.node.peerId.toString() && e.value.shards === this.manifest.shards.length && hasBit(e.value.have, seq));
    if (others.length === 0) {
      this.o.log.debug({ shard: seq }, 'cache quota: keeping a shard no other peer advertises');
      return;
    }
    this.datasets.dropShard(this.o.cacheKey, seq);
    // as many new shards as fit in the room now (none when the next is larger: the next drop makes more room)
    const fetched: number[] = [];
    for (;;) {
      const now = this.held();
      const room = this.o.quotaBytes - [...now.values()].reduce((a, b) => a + b, 0);
      const next = this.unvisited(now).find((i) => this.manifest.shards[i]!.bytes <= room);
      if (next === undefined) break;
      await fetchDataset(this.node, this.store, {
        datasetId: this.datasetId,
        dataDir: this.o.dataDir,
        shards: [next],
        // the manifest's size of `next` is a claim: the fetch stores it only if its verified bytes fit
        quotaBytes: this.o.quotaBytes,
        log: this.o.log,
        signal: this.abort.signal,
        ...(this.o.waitForHolderMs !== undefined ? { waitForHolderMs: this.o.waitForHolderMs } : {}),
      });
      this.visited.add(next);
      fetched.push(next);
    }
    this.swapped++;
    const now = this.held();
    const bytes = [...now.values()].reduce((a, b) => a + b, 0);
    this.o.log.info({ dropped: seq, fetched, held: now.size, bytes }, `cache quota: dropped shard ${seq} (trained on), fetched ${fetched.length ? `shard(s) ${fetched.join(', ')}` : 'none yet (the next does not fit)'}; holding ${now.size} of ${this.manifest.shards.length} shards, ${mib(bytes)} of ${mib(this.o.quotaBytes)}`);
    await this.o.advertise();
  }

  /** Shards in this peer's order that it does not hold and has not held this cycle. */
  private unvisited(held: ReadonlyMap<number, number>): number[] {
    return [...this.order].filter((i) => !held.has(i) && !this.visited.has(i));
  }
}

const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(2)} MiB`;
