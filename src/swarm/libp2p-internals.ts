import type { AbortOptions, Libp2p, PeerId, StreamHandler, StreamHandlerOptions } from '@libp2p/interface';
import type { KadDHT } from '@libp2p/kad-dht';
import { multiaddr } from '@multiformats/multiaddr';

/**
 * The libp2p internals a swarm node needs and the public interfaces lack: listening on a new address
 * after start (relay reservations once AutoNAT says "private"), the stream handler a service
 * registered (to withdraw and restore the relay server's hop protocol: its service cannot be stopped
 * and restarted), and kad-dht's routing table (to add a peer again, and to drop client-mode peers). Kept in one place so a libp2p
 * upgrade that moves them breaks here, loudly.
 */
interface Components {
  readonly transportManager: { listen(addrs: ReturnType<typeof multiaddr>[]): Promise<void> };
  readonly registrar: { getHandler(protocol: string): { handler: StreamHandler; options: StreamHandlerOptions } };
}

function components(libp2p: Libp2p): Components {
  const c = (libp2p as unknown as { components?: Partial<Components> }).components;
  if (typeof c?.transportManager?.listen !== 'function' || typeof c.registrar?.getHandler !== 'function') {
    throw new TypeError('this libp2p version does not expose components.transportManager.listen / registrar.getHandler, which reachability changes need');
  }
  return c as Components;
}

/** Starts making circuit-relay-v2 reservations (listening on `/p2p-circuit`) after start. */
export async function listenOnRelays(libp2p: Libp2p): Promise<void> {
  await components(libp2p).transportManager.listen([multiaddr('/p2p-circuit')]);
}

/** A protocol a service handles, switched off and on again without restarting the service. */
export function toggleableProtocol(libp2p: Libp2p, protocol: string): { set(on: boolean): Promise<void> } {
  const { handler, options } = components(libp2p).registrar.getHandler(protocol);
  let on = true;
  return {
    async set(want: boolean): Promise<void> {
      if (want === on) return;
      on = want;
      if (want) await libp2p.handle(protocol, handler, options);
      else await libp2p.unhandle(protocol);
    },
  };
}

/** kad-dht's routing table; `add` pings the peer first and adds it only if it answers. */
export interface RoutingTable {
  readonly size: number;
  add(peer: PeerId, options?: AbortOptions): Promise<void>;
  remove(peer: PeerId, options?: AbortOptions): Promise<void>;
  /** The peer when the table holds it. */
  find(peer: PeerId, options?: AbortOptions): Promise<PeerId | undefined>;
  addEventListener(type: 'peer:add', listener: (event: CustomEvent<PeerId>) => void): void;
}

export function routingTable(dht: KadDHT): RoutingTable {
  const table = (dht as { routingTable?: Partial<RoutingTable> }).routingTable;
  if (typeof table?.add !== 'function' || typeof table.remove !== 'function' || typeof table.find !== 'function' || typeof table.addEventListener !== 'function' || typeof table.size !== 'number') {
    throw new TypeError('this kad-dht version does not expose routingTable.add / remove / find / addEventListener / size');
  }
  return table as RoutingTable;
}
