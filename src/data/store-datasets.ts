import type { Store } from '../store/index.js';
import { DatasetStore } from './dataset-store.js';

const byStore = new WeakMap<Store, DatasetStore>();

/**
 * The prepared datasets in a node's store (one DatasetStore per store, made on first use). The store
 * cannot hold it itself: store/ is below data/, whose shard format DatasetStore reads.
 */
export function datasetStore(store: Store): DatasetStore {
  let datasets = byStore.get(store);
  if (!datasets) byStore.set(store, (datasets = new DatasetStore(store.db)));
  return datasets;
}
