import type { ComponentState } from '../shared/api.js';

/**
 * What the runtime can do in this version; the dashboard, the tray and `npm start` show it instead of
 * failing silently. Each part flips to available when its implementation is merged.
 */
export const COMPONENTS: readonly ComponentState[] = [
  { name: 'store', available: true, detail: 'SQLite database: checkpoints, metrics, data cache, peers, settings' },
  { name: 'engine', available: true, detail: 'ALBERT forward+backward as ONNX on onnxruntime-node, LAMB/AdamW' },
  { name: 'data', available: true, detail: 'bundled corpus, tokenizer, MLM/SOP batches cached as shards' },
  { name: 'swarm', available: true, detail: 'libp2p node and DHT records: Start joins the swarm of the configured join code (`cohort run`, `cohort swarm start` on the command line)' },
  { name: 'collaborative training', available: true, detail: 'hivemind-style collaborative optimizer with gradient all-reduce, state catch-up and a coordinator mode; without a join code Start trains alone' },
];
