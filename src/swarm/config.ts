import type { PrivateKey } from '@libp2p/interface';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import type { Logger } from '../log/logger.js';
import { DEFAULT_ENCRYPTION, type ENCRYPTIONS, BOOTSTRAP_ATTEMPTS, BOOTSTRAP_BACKOFF_INITIAL_MS, BOOTSTRAP_BACKOFF_MAX_MS, DEFAULT_REPLICATION, REACHABILITY_MODES, type ReachabilityMode } from './constants.js';
import { decodeJoinCode, soleJoinCode } from './join-code.js';
import { checkRunId } from './protocols.js';

/** Everything a swarm node is made from. Every field but `runId` (or a join code) is optional. */
export interface SwarmInit {
  /** The run (swarm) to join. May be omitted when `initialPeers` is a join code, which carries it. */
  runId?: string;
  /** Addresses to listen on. @default ['/ip4/0.0.0.0/tcp/0'], none for client mode (relay reservations only). */
  listen?: readonly string[];
  /** Addresses to announce instead of the listening ones (a public IP behind port forwarding). */
  announce?: readonly string[];
  /** Multiaddrs with /p2p/<id>, or one join code. */
  initialPeers?: readonly string[] | string;
  /** 32-byte pre-shared key: only peers holding it can connect (libp2p private network). A join code may carry it. */
  psk?: Uint8Array;
  /**
   * Whether this node serves the DHT. `auto`: start as a DHT client and serve once AutoNAT-style
   * dial-backs from other servers confirm it is reachable (the first peer of a swarm, with no initial
   * peers, serves at once: it is the bootstrap); `public`: serve from the start (a server with a known
   * public address); `private`: hivemind's client mode (DHT client, reachable through relays only).
   * @default 'auto' ('private' when `clientMode` is true)
   */
  reachability?: ReachabilityMode;
  /** hivemind's client mode: the same as `reachability: 'private'`. */
  clientMode?: boolean;
  /** Relay for client-mode peers (circuit-relay-v2 server), active while this node is public. @default reachability !== 'private' */
  relayServer?: boolean;
  /** Find peers of the same run on the local network with mDNS (no initial peers needed on a LAN). @default false */
  mdns?: boolean;
  /** Key file holding the Ed25519 identity (created when missing). Else the identity kept in the store. */
  identityFile?: string;
  /** Identity given directly (tests, benchmarks): overrides `identityFile` and the store. */
  privateKey?: PrivateKey;
  /**
   * How connections are secured (ENCRYPTIONS): every peer of a swarm uses 'native-tls', or every peer
   * one of the standard libp2p ones ('tls' and 'noise' interoperate: both are offered). TLS 1.3 uses
   * AES-GCM (hardware-accelerated on most CPUs), Noise ChaCha20-Poly1305 in JS. @default DEFAULT_ENCRYPTION
   */
  encryption?: Encryption;
  /** Keep private and loopback addresses in DHT answers (LAN and loopback swarms). @default true */
  privateAddresses?: boolean;
  /** Replicas per record. @default DEFAULT_REPLICATION */
  replication?: number;
  bootstrap?: { attempts?: number; initialBackoffMs?: number; maxBackoffMs?: number };
  /**
   * Inbound connections accepted per second from one IP (libp2p's flood guard). Raise it when many
   * peers share an address: a LAN behind one NAT, loopback tests and benchmarks. @default 5
   */
  inboundConnectionsPerHostPerSecond?: number;
  /** kad-dht's delay before its first self-query (ms); small in tests. @default 1000 */
  initialQuerySelfIntervalMs?: number;
  log?: Logger;
}

export type Encryption = (typeof ENCRYPTIONS)[number];

/** SwarmInit with defaults applied and every string parsed. */
export interface ResolvedSwarmInit {
  readonly runId: string;
  readonly listen: readonly string[];
  readonly announce: readonly string[];
  readonly initialPeers: readonly Multiaddr[];
  readonly psk: Uint8Array | undefined;
  readonly reachability: ReachabilityMode;
  readonly relayServer: boolean;
  readonly mdns: boolean;
  readonly privateAddresses: boolean;
  readonly replication: number;
  readonly bootstrap: { readonly attempts: number; readonly initialBackoffMs: number; readonly maxBackoffMs: number };
  readonly initialQuerySelfIntervalMs: number;
  readonly inboundConnectionsPerHostPerSecond: number;
  readonly encryption: Encryption;
}

export function resolveSwarmInit(init: SwarmInit): ResolvedSwarmInit {
  const peers = typeof init.initialPeers === 'string' ? [init.initialPeers] : [...(init.initialPeers ?? [])];
  let runId = init.runId;
  let psk = init.psk;
  let initialPeers: Multiaddr[];
  const code = soleJoinCode(peers);
  if (code !== undefined) {
    const join = decodeJoinCode(code);
    if (runId !== undefined && runId !== join.runId) throw new RangeError(`run id "${runId}" differs from the join code's run id "${join.runId}"; omit --run-id to use the join code's`);
    if (psk !== undefined && join.psk !== undefined && Buffer.compare(Buffer.from(psk), Buffer.from(join.psk)) !== 0) throw new RangeError('the pre-shared key differs from the join code’s');
    runId = join.runId;
    psk = psk ?? join.psk;
    initialPeers = [...join.bootstrap];
  } else {
    initialPeers = peers.map((text) => parsePeerAddr(text));
  }
  if (runId === undefined) throw new RangeError('no run id: give a run id or a join code');
  if (psk !== undefined && psk.length !== 32) throw new RangeError(`pre-shared key must be 32 bytes (got ${psk.length})`);
  if (init.reachability !== undefined && !REACHABILITY_MODES.includes(init.reachability)) {
    throw new RangeError(`reachability "${String(init.reachability)}" is invalid; accepted: ${REACHABILITY_MODES.join(', ')}`);
  }
  if (init.clientMode === true && init.reachability !== undefined && init.reachability !== 'private') {
    throw new RangeError(`client mode contradicts reachability "${init.reachability}"; client mode is reachability "private"`);
  }
  const reachability = init.clientMode === true ? 'private' : (init.reachability ?? 'auto');
  const replication = init.replication ?? DEFAULT_REPLICATION;
  if (!Number.isInteger(replication) || replication < 1 || replication > 20) throw new RangeError(`replication ${replication} must be an integer from 1 to 20`);
  for (const a of [...(init.listen ?? []), ...(init.announce ?? [])]) parseAddr(a, 'address');
  return {
    runId: checkRunId(runId),
    listen: init.listen ?? (reachability === 'private' ? [] : ['/ip4/0.0.0.0/tcp/0']),
    announce: init.announce ?? [],
    initialPeers,
    psk,
    reachability,
    relayServer: init.relayServer ?? reachability !== 'private',
    mdns: init.mdns ?? false,
    privateAddresses: init.privateAddresses ?? true,
    replication,
    bootstrap: {
      attempts: init.bootstrap?.attempts ?? BOOTSTRAP_ATTEMPTS,
      initialBackoffMs: init.bootstrap?.initialBackoffMs ?? BOOTSTRAP_BACKOFF_INITIAL_MS,
      maxBackoffMs: init.bootstrap?.maxBackoffMs ?? BOOTSTRAP_BACKOFF_MAX_MS,
    },
    initialQuerySelfIntervalMs: init.initialQuerySelfIntervalMs ?? 1000,
    inboundConnectionsPerHostPerSecond: init.inboundConnectionsPerHostPerSecond ?? 5,
    encryption: init.encryption ?? DEFAULT_ENCRYPTION,
  };
}

function parseAddr(text: string, what: string): Multiaddr {
  try {
    return multiaddr(text.trim());
  } catch (err) {
    throw new RangeError(`${what} "${text}" is not a multiaddr (${(err as Error).message}); e.g. /ip4/203.0.113.5/tcp/31337/p2p/12D3Koo…`, { cause: err });
  }
}

/** An initial peer must name its peer id, so the connection is authenticated. */
export function parsePeerAddr(text: string): Multiaddr {
  const addr = parseAddr(text, 'initial peer');
  if (addr.getComponents().at(-1)?.name !== 'p2p') throw new RangeError(`initial peer "${text}" lacks /p2p/<peer id> at the end`);
  return addr;
}
