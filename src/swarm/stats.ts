import type { Reachability } from './reachability/reachability.js';
import type { RecordsStats } from './records/service.js';

/** What a swarm node reports about itself (`cohort swarm start`'s metrics, /metrics, tests). */
export interface SwarmStats {
  readonly peerId: string;
  readonly runId: string;
  /** true until this node serves the DHT (see `reachability`). */
  readonly clientMode: boolean;
  /** `public`: serves the DHT; `private`: client mode, reachable through relays; `unknown`: auto mode before AutoNAT decided (a DHT client meanwhile). */
  readonly reachability: Reachability;
  readonly multiaddrs: readonly string[];
  readonly connections: ReadonlyArray<{ readonly peer: string; readonly remoteAddr: string; readonly direction: 'inbound' | 'outbound'; readonly limited: boolean }>;
  /** Distinct peers with an open connection. */
  readonly connectedPeers: number;
  /** Connected peers identified as client mode (they can only send: open streams to us, not accept ours). */
  readonly clientModePeers: readonly string[];
  /** Peers in the kad-dht routing table (DHT servers of this run). */
  readonly routingTableSize: number;
  readonly records: RecordsStats;
  /** Bytes per protocol since start (`global`: all connections, before protocol negotiation). */
  readonly transfer: Readonly<Record<string, { readonly sent: number; readonly received: number }>>;
}
