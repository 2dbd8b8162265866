import { z } from 'zod';
import { ConfigError } from '../config/load.js';
import { DEFAULT_ENCRYPTION, ENCRYPTIONS, REACHABILITY_MODES, type ReachabilityMode } from '../swarm/constants.js';
import type { Encryption, SwarmInit, SwarmNode } from '../swarm/index.js';
import { flagRow } from './flag-table.js';

/** How a node reaches the swarm: the flags `cohort run` and `cohort swarm start` share. */
export const SWARM_FLAGS = {
  reachability: flagRow({ schema: z.enum(REACHABILITY_MODES), arg: '<mode>', description: 'serve the DHT or not (default auto: a DHT client until AutoNAT dial-backs confirm this node is reachable; public: serve from the start; private: client mode)' }),
  clientMode: flagRow({ schema: z.boolean(), description: 'behind NAT: accept no direct connections, be reachable through relays, only send during averaging (= --reachability private)' }),
  mdns: flagRow({ schema: z.boolean(), description: 'find peers of the same run on the local network with mDNS (no initial peers needed on a LAN)' }),
  encryption: flagRow({ schema: z.enum(ENCRYPTIONS), arg: '<kind>', description: `how connections are secured, the same on every peer of a swarm: native-tls (TLS 1.3 run by Node on the TCP socket, tls-tcp/1), or standard libp2p over @libp2p/tcp for interoperability, tls or noise (both offered, this one first) (default ${DEFAULT_ENCRYPTION})` }),
};

/** How long the commands wait for AutoNAT's verdict, then for a relay reservation, before printing their addresses anyway. */
export const REACHABILITY_WAIT_MS = 15_000;

/** Until AutoNAT decided (a public node serves the DHT already), and a client-mode node got a relayed address, or `timeoutMs` passed; throws `signal`'s reason once it aborts. */
export async function waitForReachability(node: Pick<SwarmNode, 'reachability' | 'clientMode' | 'multiaddrs'>, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const settled = (): boolean => (node.reachability === 'public' && !node.clientMode) || (node.reachability === 'private' && node.multiaddrs().some((a) => a.includes('/p2p-circuit')));
  while (!settled() && Date.now() < deadline) {
    signal?.throwIfAborted();
    await new Promise((r) => setTimeout(r, 100));
  }
  signal?.throwIfAborted();
}

export function describeReachability(node: Pick<SwarmNode, 'reachability'>): string {
  if (node.reachability === 'public') return 'DHT server';
  if (node.reachability === 'private') return 'client mode: reachable through relays only';
  return 'reachability unknown: a DHT client until AutoNAT dial-backs from other peers confirm it is reachable';
}

/** `--reachability`, `--client-mode`, `--mdns` and `--encryption` as SwarmInit fields; contradicting reachabilities exit 2. */
export function swarmFlagsInit({ reachability: mode, clientMode, mdns, encryption }: { reachability?: ReachabilityMode | undefined; clientMode?: boolean | undefined; mdns?: boolean | undefined; encryption?: Encryption | undefined }): Pick<SwarmInit, 'reachability' | 'mdns' | 'encryption'> {
  if (clientMode && mode !== undefined && mode !== 'private') throw new ConfigError('--client-mode', `contradicts --reachability ${mode}; --client-mode is --reachability private`);
  const reachability = clientMode ? 'private' : mode;
  return { ...(reachability !== undefined ? { reachability } : {}), ...(mdns ? { mdns: true } : {}), ...(encryption !== undefined ? { encryption } : {}) };
}
