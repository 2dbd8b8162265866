import '../runtime/polyfills.js';
import { createHash } from 'node:crypto';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { autoNAT } from '@libp2p/autonat';
import { circuitRelayServer, circuitRelayTransport } from '@libp2p/circuit-relay-v2';
import { identify } from '@libp2p/identify';
import type { Connection, Libp2p, PeerId, Stream, StreamHandler } from '@libp2p/interface';
import { kadDHT, passthroughMapper, removePrivateAddressesMapper, type KadDHT, type SingleKadDHT } from '@libp2p/kad-dht';
import { peerIdFromString } from '@libp2p/peer-id';
import { ping } from '@libp2p/ping';
import { tcp } from '@libp2p/tcp';
import { tls } from '@libp2p/tls';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { createLibp2p } from 'libp2p';
import { pino } from 'pino';
import type { z } from 'zod';
import type { Store } from '../store/index.js';
import { bootstrap, type BootstrapReport } from './bootstrap.js';
import { resolveSwarmInit, type ResolvedSwarmInit, type SwarmInit } from './config.js';
import { CLOSEST_PEERS_TIMEOUT_MS } from './constants.js';
import { loadIdentity } from './identity.js';
import { encodeJoinCode } from './join-code.js';
import { pskProtector } from './private-network.js';
import { cohortProtocol, kadProtocol, recordsProtocol } from './protocols.js';
import { toPrometheus } from './prometheus.js';
import { TransferMetrics } from './transfer-metrics.js';
import { DhtRecords, type RecordNamespace, type RecordsStats } from './records/service.js';

export interface SwarmStats {
  readonly peerId: string;
  readonly runId: string;
  readonly clientMode: boolean;
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

export interface HandleOptions {
  /** Concurrent inbound streams per connection. @default 32 */
  readonly maxInboundStreams?: number;
  /** Accept streams over relayed (limited: 128 KiB, 2 min) connections; fine for signalling. @default true */
  readonly allowRelayed?: boolean;
}

export interface DialOptions {
  readonly signal?: AbortSignal;
  /** Allow opening the stream over a relayed (limited) connection. @default true */
  readonly allowRelayed?: boolean;
  /** Open a new connection even if one to the peer is open (e.g. to reach it through a given relay address). @default false */
  readonly newConnection?: boolean;
}

/** A running member of one swarm. */
export interface SwarmNode {
  readonly peerId: PeerId;
  readonly runId: string;
  readonly clientMode: boolean;
  /** Settles once every initial peer was reached or gave up (never rejects). */
  readonly ready: Promise<BootstrapReport>;
  /** Full addresses others can dial, `/ip4/…/tcp/…/p2p/<id>` (relayed ones for client-mode peers). */
  multiaddrs(): string[];
  /** Run id + this node's addresses (+ PSK): what a volunteer pastes to join through this node. */
  joinCode(): string;
  /** Registers a record namespace (first key segment) with the schema its values must satisfy. */
  registerNamespace<T>(name: string, schema: z.ZodType<T>, options?: { maxValueBytes?: number }): RecordNamespace<T>;
  readonly records: Pick<DhtRecords, 'store' | 'get'>;
  /** true: the peer is a DHT client (can only send); false: a server; undefined: not identified yet. */
  isClientMode(peer: PeerId | string): boolean | undefined;
  /** Serves `/cohort/<run>/<suffix>` (e.g. `allreduce/1.0.0`). */
  handle(suffix: string, handler: StreamHandler, options?: HandleOptions): Promise<void>;
  unhandle(suffix: string): Promise<void>;
  /** Opens a stream of `/cohort/<run>/<suffix>` to a peer (a peer id, or a multiaddr such as a relayed one), dialing it if needed. */
  dial(peer: PeerId | Multiaddr | string, suffix: string, options?: DialOptions): Promise<Stream>;
  stats(): SwarmStats;
  /** `stats()` in Prometheus text format. */
  prometheus(): string;
  /** The underlying libp2p node, for what this interface does not cover. */
  readonly libp2p: Libp2p;
  /** Closes every connection, listener and timer. */
  stop(): Promise<void>;
}

/**
 * Creates and starts a swarm node: libp2p over TCP with noise and yamux, identify, ping, the run's
 * kad-dht, relays for peers behind NAT, and hivemind-style records. Bootstrap runs in the
 * background (see `ready`), so a dead initial peer never stops the node from starting.
 */
export async function createSwarmNode(init: SwarmInit, store?: Store): Promise<SwarmNode> {
  const cfg = resolveSwarmInit(init);
  const log = (init.log ?? pino({ level: 'silent' })).child({ component: 'swarm' });
  const privateKey = init.privateKey ?? (await loadIdentity({ keyFile: init.identityFile, store }));
  const transfer = new TransferMetrics();
  const libp2p = await createLibp2p({
    privateKey,
    addresses: { listen: [...cfg.listen, ...(cfg.clientMode ? ['/p2p-circuit'] : [])], announce: [...cfg.announce] },
    transports: [tcp(), circuitRelayTransport()],
    connectionEncrypters: cfg.encryption === 'tls' ? [tls(), noise()] : [noise(), tls()],
    streamMuxers: [yamux()],
    ...(cfg.psk ? { connectionProtector: pskProtector(cfg.psk) } : {}),
    metrics: transfer.component(),
    connectionManager: { inboundConnectionThreshold: cfg.inboundConnectionsPerHostPerSecond, maxIncomingPendingConnections: Math.max(10, cfg.inboundConnectionsPerHostPerSecond) },
    nodeInfo: { name: 'cohort', version: '0.1.0', userAgent: `cohort/${cfg.runId}` },
    services: {
      identify: identify(),
      ping: ping(),
      dht: kadDHT({
        protocol: kadProtocol(cfg.runId),
        clientMode: cfg.clientMode,
        peerInfoMapper: cfg.privateAddresses ? passthroughMapper : removePrivateAddressesMapper,
        initialQuerySelfInterval: cfg.initialQuerySelfIntervalMs,
        logPrefix: `libp2p:cohort:${cfg.runId}:dht`,
        datastorePrefix: `/cohort/${cfg.runId}/dht`,
      }),
      ...(cfg.relayServer ? { relay: circuitRelayServer() } : {}),
      ...(cfg.clientMode ? {} : { autonat: autoNAT({ protocolPrefix: `cohort/${cfg.runId}` }) }),
    },
  });
  const dht = libp2p.services.dht as KadDHT;
  const records = new DhtRecords({
    runId: cfg.runId,
    privateKey,
    peerId: libp2p.peerId,
    serve: !cfg.clientMode,
    libp2p,
    closestPeers: (key, count) => closestPeers(libp2p, dht, recordsProtocol(cfg.runId), key, count),
    log,
    replication: cfg.replication,
  });
  await records.start();

  // Whether each peer serves this run's records (a DHT server) or not (client mode), as the peer
  // itself announced in identify. The peer store's protocol list is not used: it also collects
  // protocols this node merely tried on the peer.
  const serving = new Map<string, boolean>();
  libp2p.addEventListener('peer:identify', (event) => {
    const { peerId, listenAddrs, protocols } = event.detail;
    const server = protocols.includes(recordsProtocol(cfg.runId));
    serving.set(peerId.toString(), server);
    store?.peers.seen(peerId.toString(), listenAddrs.map(String), { runId: cfg.runId, clientMode: !server });
  });

  const stopping = new AbortController();
  const ready = bootstrap(libp2p, cfg.initialPeers, {
    ...cfg.bootstrap,
    signal: stopping.signal,
    onRetry: (addr, attempt, delayMs, error) => log.warn(`initial peer ${addr} did not answer (attempt ${attempt}/${cfg.bootstrap.attempts}: ${error}); retrying in ${delayMs} ms`),
  }).then(async (report) => {
    logBootstrap(log, cfg, report);
    if (report.connected.length > 0) await joinLookup(dht, libp2p.peerId, stopping.signal, log);
    return report;
  });

  const node: SwarmNode = {
    peerId: libp2p.peerId,
    runId: cfg.runId,
    clientMode: cfg.clientMode,
    ready,
    libp2p,
    records,
    multiaddrs: () => libp2p.getMultiaddrs().map(String),
    joinCode: () => {
      const direct = libp2p.getMultiaddrs().filter((a) => !a.toString().includes('/p2p-circuit'));
      const addrs = direct.length > 0 ? direct : libp2p.getMultiaddrs();
      return encodeJoinCode({ runId: cfg.runId, bootstrap: addrs.slice(0, 32), ...(cfg.psk ? { psk: cfg.psk } : {}) });
    },
    registerNamespace: (name, schema, options) => records.namespace(name, schema, options),
    isClientMode: (peer) => {
      const id = peer.toString();
      if (id === libp2p.peerId.toString()) return cfg.clientMode;
      const server = serving.get(id);
      return server === undefined ? undefined : !server;
    },
    handle: (suffix, handler, options = {}) =>
      libp2p.handle(cohortProtocol(cfg.runId, suffix), handler, { maxInboundStreams: options.maxInboundStreams ?? 32, runOnLimitedConnection: options.allowRelayed ?? true }),
    unhandle: (suffix) => libp2p.unhandle(cohortProtocol(cfg.runId, suffix)),
    dial: (peer, suffix, options = {}) =>
      libp2p.dialProtocol(dialTarget(peer), cohortProtocol(cfg.runId, suffix), {
        ...(options.signal ? { signal: options.signal } : {}),
        runOnLimitedConnection: options.allowRelayed ?? true,
        force: options.newConnection ?? false,
        // Without this, multistream-select is finished lazily with the first write: a stream that
        // only reads would never reach the handler, and an unsupported protocol would fail late.
        negotiateFully: true,
      }),
    stats: () => ({
      peerId: libp2p.peerId.toString(),
      runId: cfg.runId,
      clientMode: cfg.clientMode,
      multiaddrs: libp2p.getMultiaddrs().map(String),
      connections: libp2p.getConnections().map(describeConnection),
      connectedPeers: libp2p.getPeers().length,
      routingTableSize: (dht as SingleKadDHT).routingTable?.size ?? 0,
      clientModePeers: libp2p.getPeers().map(String).filter((id) => serving.get(id) === false),
      records: records.stats(),
      transfer: transfer.snapshot(),
    }),
    prometheus: () => toPrometheus(node.stats()),
    stop: async () => {
      stopping.abort();
      await ready;
      await records.stop();
      await libp2p.stop();
    },
  };
  return node;
}

/**
 * Kademlia's join: look up our own id once the initial peers answered, so that the peers near us
 * learn about us and we about them. kad-dht's own first self-query may run before bootstrap ends.
 */
async function joinLookup(dht: KadDHT, self: PeerId, stopping: AbortSignal, log: pino.Logger): Promise<void> {
  try {
    for await (const event of dht.getClosestPeers(self.toMultihash().bytes, { signal: AbortSignal.any([stopping, AbortSignal.timeout(CLOSEST_PEERS_TIMEOUT_MS)]) })) void event;
  } catch (err) {
    if (!stopping.aborted) log.debug({ err: (err as Error).message }, 'join lookup ended early');
  }
}

function dialTarget(peer: PeerId | Multiaddr | string): PeerId | Multiaddr {
  if (typeof peer !== 'string') return peer;
  return peer.startsWith('/') ? multiaddr(peer) : peerIdFromString(peer);
}

function describeConnection(c: Connection): SwarmStats['connections'][number] {
  return { peer: c.remotePeer.toString(), remoteAddr: c.remoteAddr.toString(), direction: c.direction, limited: c.limits !== undefined };
}

/** The `replication` DHT servers nearest to the key (XOR distance of SHA-256 ids, as Kademlia). */
async function closestPeers(libp2p: Libp2p, dht: KadDHT, protocol: string, key: Uint8Array, count: number): Promise<PeerId[]> {
  const target = sha256(key);
  const found = new Map<string, PeerId>();
  // The query's answer plus the servers we are connected to: in a young swarm the query can end
  // before the peers it asked know every server.
  for (const id of await connectedServers(libp2p, protocol)) found.set(id.toString(), id);
  for await (const event of dht.getClosestPeers(key, { signal: AbortSignal.timeout(CLOSEST_PEERS_TIMEOUT_MS) })) {
    if (event.name === 'FINAL_PEER') found.set(event.peer.id.toString(), event.peer.id);
  }
  const distance = (id: PeerId): Buffer => xor(sha256(id.toMultihash().bytes), target);
  return [...found.values()].sort((a, b) => Buffer.compare(distance(a), distance(b))).slice(0, count);
}

/** Connected peers that serve this run's records protocol (DHT servers), as identify reported. */
async function connectedServers(libp2p: Libp2p, protocol: string): Promise<PeerId[]> {
  const peers = await Promise.all(libp2p.getPeers().map(async (id) => ((await libp2p.peerStore.get(id).catch(() => undefined))?.protocols.includes(protocol) ? id : undefined)));
  return peers.filter((id): id is PeerId => id !== undefined);
}

function sha256(bytes: Uint8Array): Buffer {
  return createHash('sha256').update(bytes).digest();
}

function xor(a: Buffer, b: Buffer): Buffer {
  return Buffer.from(a.map((x, i) => x ^ b[i]!));
}

function logBootstrap(log: pino.Logger, cfg: ResolvedSwarmInit, report: BootstrapReport): void {
  if (cfg.initialPeers.length === 0) {
    log.info(`no initial peers: this node starts swarm "${cfg.runId}"; others join with its join code`);
    return;
  }
  if (report.connected.length > 0) {
    log.info(`joined swarm "${cfg.runId}" through ${report.connected.length} of ${cfg.initialPeers.length} initial peer(s)`);
    for (const f of report.failed) log.warn(`initial peer ${f.addr} did not answer: ${f.error}`);
    return;
  }
  log.error(
    `none of the ${cfg.initialPeers.length} initial peer(s) answered after ${cfg.bootstrap.attempts} attempts each (${report.failed.map((f) => `${f.addr}: ${f.error}`).join('; ')}); ` +
      'check the addresses or join code, that those peers are running, and that a firewall does not block them. This node keeps running and can be joined by others.',
  );
}
