/**
 * The swarm layer: one libp2p node per run, hivemind-style DHT records, join codes, relays for
 * peers behind NAT.
 *
 * @example
 * const node = await createSwarmNode({ runId: 'albert-demo', initialPeers: 'cohort:…' }, store);
 * const progress = node.registerNamespace('progress', z.object({ samples: z.number() }));
 * await progress.store('progress', '', { samples: 128 }, Date.now() + 60_000);
 * const all = await progress.get('progress'); // Map: peer id → { value, expiration, owner, subkey }
 */
export { createSwarmNode, type SwarmNode, type HandleOptions, type DialOptions } from './node.js';
export type { SwarmStats } from './stats.js';
export { resolveSwarmInit, type Encryption, type SwarmInit } from './config.js';
export { DEFAULT_ENCRYPTION, ENCRYPTIONS, type ReachabilityMode } from './constants.js';
export type { Reachability } from './reachability/reachability.js';
export type { BootstrapReport } from './bootstrap.js';
export type { RecordEntry, RecordNamespace, RecordsStats, StoreResult } from './records/service.js';
export { encodeJoinCode, decodeJoinCode, isJoinCode, soleJoinCode, type JoinInfo } from './join-code.js';
export { readToEnd } from './streams.js';
export { statsMetricPoints, swarmMetrics } from './prometheus.js';
export { generatePsk } from './private-network.js';
export { cohortProtocol, kadProtocol, recordsProtocol } from './protocols.js';
export { JoinCodeError, IdentityError, SwarmUnreachableError, type RejectReason } from './errors.js';
