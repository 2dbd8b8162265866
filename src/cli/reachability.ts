import { ConfigError } from '../config/load.js';
import type { SwarmInit, SwarmNode } from '../swarm/index.js';
import { REACHABILITY_MODES, type ReachabilityMode } from '../swarm/reachability/reachability.js';
import { choiceFlag } from './flags.js';

/** How long the commands wait for AutoNAT's verdict, then for a relay reservation, before printing their addresses anyway. */
export const REACHABILITY_WAIT_MS = 15_000;

/** Until AutoNAT decided (a public node serves the DHT already), and a client-mode node got a relayed address, or `timeoutMs` passed. */
export async function waitForReachability(node: Pick<SwarmNode, 'reachability' | 'clientMode' | 'multiaddrs'>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const settled = (): boolean => (node.reachability === 'public' && !node.clientMode) || (node.reachability === 'private' && node.multiaddrs().some((a) => a.includes('/p2p-circuit')));
  while (!settled() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
}

export function describeReachability(node: Pick<SwarmNode, 'reachability'>): string {
  if (node.reachability === 'public') return 'DHT server';
  if (node.reachability === 'private') return 'client mode: reachable through relays only';
  return 'reachability unknown: a DHT client until AutoNAT dial-backs from other peers confirm it is reachable';
}

/** `--reachability` and `--client-mode` as SwarmInit fields; contradicting them exits 2. */
export function reachabilityInit(raw: string | undefined, clientMode: boolean | undefined): Pick<SwarmInit, 'reachability'> {
  const mode = choiceFlag<ReachabilityMode>('--reachability', raw, REACHABILITY_MODES);
  if (clientMode && mode !== undefined && mode !== 'private') throw new ConfigError('--client-mode', `contradicts --reachability ${mode}; --client-mode is --reachability private`);
  if (clientMode) return { reachability: 'private' };
  return mode === undefined ? {} : { reachability: mode };
}
