import type { ComponentState } from '../shared/api.js';

/**
 * What the runtime can do in this version; the dashboard, the tray and `npm start` show it instead of
 * failing silently. Each part flips to available when its implementation is merged.
 */
export const COMPONENTS: readonly ComponentState[] = [
  { name: 'store', available: true, detail: 'SQLite database: checkpoints, metrics, data cache, peers, settings' },
  { name: 'engine', available: true, detail: 'ALBERT forward+backward as ONNX on onnxruntime-node, LAMB/AdamW' },
  { name: 'data', available: true, detail: 'bundled corpus, tokenizer, MLM/SOP batches cached as shards' },
  { name: 'swarm', available: false, detail: 'libp2p node and DHT records: run `cohort swarm start`; the headless node does not start one yet' },
  { name: 'collaborative training', available: false, detail: 'averaging and the collaborative optimizer: not in this version yet' },
];
