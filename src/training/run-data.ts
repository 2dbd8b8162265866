/**
 * The data a peer trains on in a run: the dataset the run pins (held already, or fetched from the
 * swarm's holders with progress lines) or, where the run pins none, the peer's own newest prepared
 * one. Either way the peer declares that dataset's id and tokenizer hash to matchmaking, so it never
 * averages with peers whose token ids mean something else.
 */
import type { RunData } from '../collab/index.js';
import { datasetStore, type DatasetInfo } from '../data/index.js';
import type { Logger } from '../log/logger.js';
import { fetchDataset, manifestOf, type FetchProgress } from '../shards/index.js';
import type { Store } from '../store/index.js';
import type { SwarmNode } from '../swarm/index.js';
import { pick } from '../util/pick.js';
import { ensureDataset } from './data.js';
import { RunDataError } from './errors.js';

/** A dataset's pins (what the run record and matchmaking compare); null until it has a content id. */
export function pinsOf(info: DatasetInfo): RunData | null {
  return info.datasetId === null ? null : { datasetId: info.datasetId, tokenizerSha256: info.tokenizerHash };
}

/** The data a founder pins: its newest complete dataset (what it would train on), or null when it has none. */
export function ownRunData(store: Store): RunData | null {
  const newest = datasetStore(store).list()[0];
  return newest === undefined ? null : pinsOf(newest);
}

export interface RunDatasetOptions {
  readonly node: SwarmNode;
  readonly store: Store;
  readonly dataDir: string;
  readonly log: Logger;
  /** The run's data; null: the run pins none. */
  readonly data: RunData | null;
  readonly signal?: AbortSignal | undefined;
  /** Told the fetch's progress (as the log lines, at most every PROGRESS_EVENT_MS and the last). */
  readonly onProgress?: ((p: FetchProgress) => void) | undefined;
  /** Bytes of the run's shards to hold (`--cache-quota`): a random subset that fits is fetched. @default all of them */
  readonly quotaBytes?: number | undefined;
  /** How long a fetch waits for a holder to (re)appear before failing. @default fetchDataset's */
  readonly waitForHolderMs?: number | undefined;
}

/**
 * The dataset to train on: the run's, fetched from the swarm when this store lacks it; or, when the
 * run pins none, this store's (the bundled corpus prepared on a first start).
 */
export async function runDataset(o: RunDatasetOptions): Promise<DatasetInfo> {
  const datasets = datasetStore(o.store);
  if (o.data === null) {
    await ensureDataset(o.store, o.dataDir, o.log);
    return datasets.list()[0]!;
  }
  const { datasetId, tokenizerSha256 } = o.data;
  let info = datasets.byDatasetId(datasetId);
  // a fetch stopped part-way (Ctrl-C, a crash) left a readable part: a peer meant to hold it all fetches the rest
  const total = info?.manifest ? manifestOf(info, datasets).shards.length : 0;
  const partial = info !== undefined && o.quotaBytes === undefined && info.shardCount < total;
  if (info === undefined || partial) {
    o.log.info(info !== undefined ? `holding ${info.shardCount} of the ${total} shards of the run's dataset ${datasetId} (an earlier fetch stopped part-way): fetching the rest` : `fetching the run's dataset ${datasetId} and its tokenizer from the swarm`);
    try {
      ({ info } = await fetchDataset(o.node, o.store, { ...pick(o, ['dataDir', 'log', 'signal', 'waitForHolderMs', 'quotaBytes']), datasetId, onProgress: progressReports(o.log, o.onProgress) }));
    } catch (err) {
      // stopped while fetching: a stop, not a failed fetch (the shards stored so far stay)
      o.signal?.throwIfAborted();
      // chooseShards: the quota cannot hold the smallest shard; waiting for holders would not help
      if (err instanceof RangeError && o.quotaBytes !== undefined) throw new RunDataError(`${err.message}: give a larger --cache-quota, or none to hold all of it`, { cause: err });
      if (info === undefined) throw new RunDataError(`could not fetch the run's dataset ${datasetId} from the swarm: ${(err as Error).message}; retry when a peer holding it is online (\`cohort status --join CODE\` shows how many peers hold each shard)`, { cause: err });
      o.log.warn(`could not fetch the rest of the run's dataset ${datasetId} (${(err as Error).message}): training on the ${info.shardCount} of ${total} shards held`);
    }
  }
  // a dataset id covers its tokenizer's hash, so this only fails on a damaged store
  if (info.tokenizerHash !== tokenizerSha256) throw new RunDataError(`dataset ${datasetId} in ${o.store.file} has tokenizer sha256 ${info.tokenizerHash}, the run's is ${tokenizerSha256}; use an empty --data-dir to fetch the run's data again`);
  return info;
}

const mb = (bytes: number): string => `${(bytes / 1024 ** 2).toFixed(1)} MB`;

/** Fetch progress as log lines (bytes, shards, rate, ETA), at most one every PROGRESS_EVERY_MS and the last; to `report` (the dashboard) every PROGRESS_EVENT_MS. */
const PROGRESS_EVERY_MS = 2000;
const PROGRESS_EVENT_MS = 500;
function progressReports(log: Logger, report: ((p: FetchProgress) => void) | undefined): (p: FetchProgress) => void {
  let last = 0;
  let lastReport = 0;
  return (p) => {
    const now = Date.now();
    const done = p.shardsDone === p.shardsTotal;
    if (report && (done || now - lastReport >= PROGRESS_EVENT_MS)) {
      lastReport = now;
      report(p);
    }
    if (!done && now - last < PROGRESS_EVERY_MS) return;
    last = now;
    const pct = p.totalBytes > 0 ? ` (${((100 * p.bytes) / p.totalBytes).toFixed(0)}%)` : '';
    const eta = p.etaSeconds === null ? '' : `, ETA ${Math.ceil(p.etaSeconds)} s`;
    log.info(`fetching dataset: ${(p.bytes / 1024 ** 2).toFixed(1)} of ${mb(p.totalBytes)}${pct}, ${p.shardsDone}/${p.shardsTotal} shards, ${mb(p.bytesPerSecond)}/s${eta}`);
  };
}
