/**
 * The shard exchange: prepared datasets (tokenizer.json + tokenized shards) travel over the swarm,
 * content-addressed by sha256 (docs/protocol.md, "Shard exchange").
 *
 * @example
 * const server = new ShardServer(node, store, log, { uploadBytesPerSecond: 20e6 });
 * await server.start();                                   // serves and advertises what the store holds
 * const r = await fetchDataset(node, store, { datasetId, dataDir, quotaBytes, log, onProgress });
 * await server.advertise();                               // the newcomer now serves what it fetched
 */
export { ShardServer, holdersPerShard, holdingsOf, manifestOf, serveShards, type ShardServerOptions, type ShardServing } from './server.js';
export { fetchDataset, chooseShards, shardOrder, type FetchOptions, type FetchProgress, type FetchResult } from './fetch.js';
export { ShardRotation, type RotationOptions } from './rotation.js';
export type { Manifest } from './messages.js';
