import '../runtime/polyfills.js';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { noise } from '@chainsafe/libp2p-noise';
import { yamux } from '@chainsafe/libp2p-yamux';
import { circuitRelayServer, circuitRelayTransport, RELAY_V2_HOP_CODEC } from '@libp2p/circuit-relay-v2';
import { identify, identifyPush, type Identify } from '@libp2p/identify';
import { UnsupportedProtocolError, type Connection, type Libp2p, type PeerId, type Stream, type StreamHandler } from '@libp2p/interface';
import { mdns } from '@libp2p/mdns';
import { kadDHT, passthroughMapper, removePrivateAddressesMapper, type KadDHT } from '@libp2p/kad-dht';
import { peerIdFromString } from '@libp2p/peer-id';
import { ping } from '@libp2p/ping';
import { tcp } from '@libp2p/tcp';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { createLibp2p } from 'libp2p';
import { pino } from 'pino';
import type { z } from 'zod';
import { bootstrap, type BootstrapReport } from './bootstrap.js';
import { resolveSwarmInit, type ResolvedSwarmInit, type SwarmInit } from './config.js';
import { BOOTSTRAP_DIAL_TIMEOUT_MS, CLOSEST_PEERS_TIMEOUT_MS, CONNECTION_PING_INTERVAL_MS, IDENTIFY_PUSH_DEBOUNCE_MS, PING_TIMEOUT_MIN_MS, REJOIN_CHECK_MS, ROUTING_REFILL_MAX_TIMEOUT_MS, SERVER_JOIN_LOOKUP_DELAYS_MS } from './constants.js';
import { loadIdentity } from './identity.js';
import { SwarmListenError } from './errors.js';
import { encodeJoinCode } from './join-code.js';
import { listenOnRelays, routingTable, toggleableProtocol, type RoutingTable } from './libp2p-internals.js';
import { pskProtector } from './private-network.js';
import { cohortProtocol, dialbackProtocol, kadProtocol, otherVersions, recordsProtocol } from './protocols.js';
import { Notices, OTHER_RELEASE_NOTICE } from '../util/notices.js';
import { DialbackServer } from './reachability/dialback.js';
import { ReachabilityService, type Reachability } from './reachability/reachability.js';
import type { SwarmStats } from './stats.js';
import type { SwarmStore } from './identity.js';
import { TransferMetrics } from './transfer-metrics.js';
import { DhtRecords, type RecordNamespace } from './records/service.js';
import { TlsCredentials } from './tls-credentials.js';
import { tlsEncrypter } from './tls-encrypter.js';
import { tlsTcp } from './tls-tcp.js';

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
  /** A DHT client now (client mode, or auto mode not yet confirmed reachable): can only send. Changes when AutoNAT decides. */
  readonly clientMode: boolean;
  /** This node's reachability now (see SwarmInit.reachability). */
  readonly reachability: Reachability;
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
  /** The underlying libp2p node, for what this interface does not cover. */
  readonly libp2p: Libp2p;
  /** What this node already told its volunteer about other peers (another release, another schema): once per node, and the dashboard's notices. */
  readonly notices: Notices;
  /** Closes every connection, listener and timer. */
  stop(): Promise<void>;
}

/** libp2p's error for listen addresses that failed, as one line naming each (its message holds every error's stack). */
function listenFailure(err: unknown): never {
  if (!(err instanceof Error) || err.name !== 'UnsupportedListenAddressesError') throw err;
  const failed = [...err.message.matchAll(/^\s+(\/\S+): (?:\w*Error: )?(.*)$/gm)].map(([, addr, why]) => `${addr} (${why})`);
  throw new SwarmListenError(`cannot listen on ${failed.length > 0 ? failed.join(', ') : err.message}: another program or Cohort node may hold the port, or the address is not this machine's; stop it or choose another listen address`, { cause: err });
}

/**
 * Creates and starts a swarm node: libp2p over TCP with TLS 1.3 and yamux, identify, ping, the run's
 * kad-dht, relays for peers behind NAT, and hivemind-style records. Bootstrap runs in the
 * background (see `ready`), so a dead initial peer never stops the node from starting.
 */
export async function createSwarmNode(init: SwarmInit, store?: SwarmStore): Promise<SwarmNode> {
  const cfg = resolveSwarmInit(init);
  const log = (init.log ?? pino({ level: 'silent' })).child({ component: 'swarm' });
  const privateKey = init.privateKey ?? (await loadIdentity({ keyFile: init.identityFile, store }));
  const transfer = new TransferMetrics();
  const credentials = new TlsCredentials(privateKey);
  const forcedPrivate = cfg.reachability === 'private';
  const libp2p = await createLibp2p({
    privateKey,
    addresses: { listen: [...cfg.listen, ...(forcedPrivate ? ['/p2p-circuit'] : [])], announce: [...cfg.announce] },
    // native-tls: TLS 1.3 on the TCP socket for direct connections, the encrypters for relayed ones;
    // else standard libp2p TCP, every connection secured by the encrypters
    transports: [cfg.encryption === 'native-tls' ? tlsTcp({ credentials, onInboundError: (remote, err) => log.info(`inbound connection from ${remote} refused: ${err.message}`) }) : tcp(), circuitRelayTransport()],
    // /tls/1.0.0 with the node's one certificate (@libp2p/tls's tls() makes one per connection)
    connectionEncrypters: cfg.encryption === 'noise' ? [noise(), tlsEncrypter(credentials)] : [tlsEncrypter(credentials), noise()],
    streamMuxers: [yamux()],
    ...(cfg.psk ? { connectionProtector: pskProtector(cfg.psk) } : {}),
    metrics: transfer.component(),
    connectionManager: { inboundConnectionThreshold: cfg.inboundConnectionsPerHostPerSecond, maxIncomingPendingConnections: Math.max(10, cfg.inboundConnectionsPerHostPerSecond) },
    connectionMonitor: { pingInterval: CONNECTION_PING_INTERVAL_MS, pingTimeout: { minTimeout: PING_TIMEOUT_MIN_MS } },
    nodeInfo: { name: 'cohort', version: '0.1.0', userAgent: `cohort/${cfg.runId}` },
    services: {
      identify: identify(),
      // Tells connected peers at once when this node starts or stops serving (their isClientMode flips).
      identifyPush: identifyPush({ debounce: IDENTIFY_PUSH_DEBOUNCE_MS }),
      ping: ping(),
      dht: kadDHT({
        protocol: kadProtocol(cfg.runId),
        // Explicit, so kad-dht never switches on its own: only the reachability decision does.
        clientMode: cfg.reachability !== 'public',
        peerInfoMapper: cfg.privateAddresses ? passthroughMapper : removePrivateAddressesMapper,
        initialQuerySelfInterval: cfg.initialQuerySelfIntervalMs,
        // k: a lookup ends once the k nearest peers answered, dialing every peer it asks, and a
        // FIND_NODE answer names k peers. Records need no more than a get asks (2 × replication, 10
        // by default); with libp2p's 20 every joiner dialed every node of a swarm of ~25, and 50
        // in-process peers did not finish starting (bench dht, docs/protocol.md)
        kBucketSize: 2 * cfg.replication,
        logPrefix: `libp2p:cohort:${cfg.runId}:dht`,
        datastorePrefix: `/cohort/${cfg.runId}/dht`,
      }),
      ...(cfg.relayServer ? { relay: circuitRelayServer() } : {}),
      ...(cfg.mdns ? { mdns: mdns({ serviceTag: mdnsServiceTag(cfg.runId) }) } : {}),
    },
  }).catch(listenFailure);
  const dht = libp2p.services.dht;
  // Whether each peer serves this run's records (a DHT server) or not (client mode), as the peer
  // itself announced in identify (and identify-push, when its reachability changes). The peer
  // store's protocol list is not used: libp2p adds to it every protocol a peer opened a stream of,
  // so a client-mode peer that sent this node a records request or a DHT query is listed as serving
  // both. Counted as a server, it displaced real ones from a key's closest (a store reached fewer
  // replicas) and was asked in every lookup.
  const serving = new Map<string, boolean>();
  const table = routingTable(dht);
  // peers of another Cohort release, by the versions their identify lists: told once per peer and protocol
  const notices = new Notices();
  libp2p.addEventListener('peer:identify', (event) => {
    const { peerId, listenAddrs, protocols } = event.detail;
    const other = otherVersions(cfg.runId, protocols, libp2p.getProtocols()).filter((o) => notices.first(`${peerId.toString()} ${o.theirs}`, OTHER_RELEASE_NOTICE));
    if (other.length > 0) {
      log.warn(
        { peer: peerId.toString() },
        `peer ${peerId.toString()} speaks ${other.map((o) => o.theirs).join(', ')} where this node speaks ${other.map((o) => o.ours).join(', ')}: it runs another Cohort release, and the two do not exchange these; if this node's release is older, update it (the app updates itself on restart; \`cohort --version\` shows the CLI's)`,
      );
    }
    const server = protocols.includes(recordsProtocol(cfg.runId));
    serving.set(peerId.toString(), server);
    store?.peers.seen(peerId.toString(), listenAddrs.map(String), { runId: cfg.runId, clientMode: !server });
    if (!server) dropClient(peerId);
  });
  // last seen: until the last connection to the peer closed, not only when it identified
  libp2p.addEventListener('peer:disconnect', (event) => {
    try {
      store?.peers.lastConnected(event.detail.toString());
    } catch (err) {
      log.debug({ peer: event.detail.toString(), err: (err as Error).message }, 'could not record when a peer was last connected'); // a store closed before the node
    }
  });
  // kad-dht adds to its routing table every peer a lookup's answers name, once it answers a libp2p
  // ping, and a DHT server names a client too when asked for the client's own id (a dial of a NAT'd
  // peer by its id looks it up). A client in the table was then asked in this node's lookups, and
  // through the answers in everyone's: over its relayed connection (refused), or at its private
  // address, where a NAT'd asker's dial waited out its 5 s timeout (the swarm lab's NAT'd peers read
  // records in 5-7 s at the 90th percentile, and came late to rounds). The table keeps DHT servers.
  function dropClient(peer: PeerId): void {
    table.remove(peer).catch((err: unknown) => log.debug({ peer: peer.toString(), err: (err as Error).message }, 'could not drop a client-mode peer from the routing table'));
  }
  table.addEventListener('peer:add', (event) => {
    if (serving.get(event.detail.toString()) === false) dropClient(event.detail);
  });
  const records = new DhtRecords({
    runId: cfg.runId,
    privateKey,
    peerId: libp2p.peerId,
    serve: false,
    libp2p,
    closestPeers: (key, count) => closestPeers(libp2p, dht, table, (peer) => serving.get(peer.toString()) === true, key, count, log),
    log,
    replication: cfg.replication,
  });
  await records.start();

  // What a DHT server does and a client does not: the DHT, records, relaying, dial-backs. The relay
  // server is created at start (its hop protocol withdrawn until this node is public).
  const hop = cfg.relayServer ? toggleableProtocol(libp2p, RELAY_V2_HOP_CODEC) : undefined;
  const dialbackServer = new DialbackServer(libp2p, log);
  let servingDht = false;
  let relayListening = forcedPrivate;
  const stopping = new AbortController();
  let lookup: Promise<void> | undefined;
  const apply = async (state: Reachability): Promise<void> => {
    const on = state === 'public';
    await dht.setMode(on ? 'server' : 'client');
    await records.setServing(on);
    await hop?.set(on);
    if (on && !servingDht) await libp2p.handle(dialbackProtocol(cfg.runId), (stream, connection) => dialbackServer.onStream(stream, connection), { maxInboundStreams: 2 });
    if (!on && servingDht) await libp2p.unhandle(dialbackProtocol(cfg.runId));
    // A new server looks itself up again (Kademlia's join): its first lookup, as a client, left no
    // trace in others' routing tables. Peers that turned servers about when it did are only in the
    // answers once identify-push told their peers, so it looks up a few times, spaced out.
    if (on && !servingDht && cfg.reachability === 'auto' && cfg.initialPeers.length > 0) lookup = serverJoinLookups(dht, libp2p.peerId, stopping.signal, log);
    servingDht = on;
    // Reservations only once known unreachable; a node that turns public later keeps its relayed address as a fallback.
    if (state === 'private' && !relayListening) {
      relayListening = true;
      await listenOnRelays(libp2p);
      logFirstRelayAddress(libp2p, log);
    }
  };
  const reachability = new ReachabilityService({ libp2p, protocol: dialbackProtocol(cfg.runId), mode: cfg.reachability, log, apply });
  // auto starts as a client (hop protocol withdrawn, no reservations yet); a forced mode is applied at once.
  await apply(reachability.state);
  if (forcedPrivate) logFirstRelayAddress(libp2p, log);
  if (cfg.mdns) dialMdnsPeers(libp2p, log);

  let rejoin: Promise<void> | undefined;
  const identifyService: Identify = libp2p.services.identify;
  const ready = bootstrap(libp2p, cfg.initialPeers, {
    ...cfg.bootstrap,
    signal: stopping.signal,
    onRetry: (addr, attempt, delayMs, error) => log.warn(`initial peer ${addr} did not answer (attempt ${attempt}/${cfg.bootstrap.attempts}: ${error}); retrying in ${delayMs} ms`),
  }).then(async (report) => {
    // a node stopped while bootstrapping neither keeps running nor tried every attempt: nothing to report
    if (!stopping.signal.aborted) logBootstrap(log, cfg, report);
    // Before the join lookup: with an empty routing table that lookup waits up to 10 s for kad-dht
    // to add a peer, and the refill is what adds it when kad-dht's one try failed.
    if (!stopping.signal.aborted && cfg.initialPeers.length > 0) rejoin = rejoinWhenAlone(libp2p, dht, identifyService, (peer) => serving.get(peer.toString()), cfg, stopping.signal, log);
    if (report.connected.length > 0) await joinLookup(dht, libp2p.peerId, stopping.signal, log);
    if (!stopping.signal.aborted) reachability.start(cfg.initialPeers.length, report.connected.length);
    return report;
  });

  const node: SwarmNode = {
    peerId: libp2p.peerId,
    runId: cfg.runId,
    get clientMode() {
      return !servingDht;
    },
    get reachability() {
      return reachability.state;
    },
    ready,
    libp2p,
    notices,
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
      if (id === libp2p.peerId.toString()) return !servingDht;
      const server = serving.get(id);
      return server === undefined ? undefined : !server;
    },
    handle: (suffix, handler, options = {}) =>
      libp2p.handle(cohortProtocol(cfg.runId, suffix), handler, { maxInboundStreams: options.maxInboundStreams ?? 32, runOnLimitedConnection: options.allowRelayed ?? true }),
    unhandle: (suffix) => libp2p.unhandle(cohortProtocol(cfg.runId, suffix)),
    dial: (peer, suffix, options = {}) => {
      const target = dialTarget(peer);
      const protocol = cohortProtocol(cfg.runId, suffix);
      return libp2p
        .dialProtocol(target, protocol, {
          ...(options.signal ? { signal: options.signal } : {}),
          runOnLimitedConnection: options.allowRelayed ?? true,
          force: options.newConnection ?? false,
          // Without this, multistream-select is finished lazily with the first write: a stream that
          // only reads would never reach the handler, and an unsupported protocol would fail late.
          negotiateFully: true,
        })
        .catch((err: unknown) => {
          // multistream-select's "could not negotiate" names neither the peer nor the likely cause
          if ((err as Error).name !== 'UnsupportedProtocolError') throw err;
          throw new UnsupportedProtocolError(`${target.toString()} does not speak ${protocol}: it runs another Cohort release, or does not serve it`);
        });
    },
    stats: () => ({
      peerId: libp2p.peerId.toString(),
      runId: cfg.runId,
      clientMode: !servingDht,
      reachability: reachability.state,
      multiaddrs: libp2p.getMultiaddrs().map(String),
      connections: libp2p.getConnections().map(describeConnection),
      connectedPeers: libp2p.getPeers().length,
      routingTableSize: table.size,
      clientModePeers: libp2p.getPeers().map(String).filter((id) => serving.get(id) === false),
      records: records.stats(),
      transfer: transfer.snapshot(),
    }),
    stop: async () => {
      stopping.abort();
      await ready;
      await rejoin;
      await reachability.stop();
      await lookup;
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

/**
 * Until the node stops: every REJOIN_CHECK_MS, a node with no connection left redials its initial
 * peers (once each) and looks itself up again. Connections drop when pings time out on a loaded
 * machine or peers restart; a node left with none would otherwise stay alone for good. A node that
 * is connected but whose routing table is empty refills it (`refillRoutingTable`).
 */
async function rejoinWhenAlone(libp2p: Libp2p, dht: KadDHT, identifyService: Identify, servesDht: (peer: PeerId) => boolean | undefined, cfg: ResolvedSwarmInit, stopping: AbortSignal, log: pino.Logger): Promise<void> {
  let alone = false;
  let refillTimeoutMs = REJOIN_CHECK_MS;
  for (;;) {
    try {
      await sleep(REJOIN_CHECK_MS, undefined, { signal: stopping });
    } catch {
      return; // stopping
    }
    if (libp2p.getConnections().length > 0) {
      alone = false;
      const filled = await refillRoutingTable(libp2p, dht, identifyService, servesDht, refillTimeoutMs, stopping, log);
      // An answer slower than the time given is not lost: on a loaded machine an identify or ping
      // of a busy peer takes longer than 5 s, and the same wait would time out again each time.
      refillTimeoutMs = filled ? REJOIN_CHECK_MS : Math.min(2 * refillTimeoutMs, ROUTING_REFILL_MAX_TIMEOUT_MS);
      continue;
    }
    // said once per time alone: the redials repeat every few seconds while the swarm is unreachable
    if (!alone) log.warn(`this node lost every connection: redialing its ${cfg.initialPeers.length} initial peer(s) every ${REJOIN_CHECK_MS / 1000} s until one answers`);
    alone = true;
    const report = await bootstrap(libp2p, cfg.initialPeers, { ...cfg.bootstrap, attempts: 1, signal: stopping });
    if (report.connected.length === 0) continue;
    alone = false;
    log.info(`rejoined swarm "${cfg.runId}" through ${report.connected.length} of ${cfg.initialPeers.length} initial peer(s)`);
    await joinLookup(dht, libp2p.peerId, stopping, log);
  }
}

/**
 * kad-dht adds a connected peer to its routing table once, when identify first reports the peer's
 * DHT protocol, and only if a ping answers then. On a loaded machine either can time out, and
 * nothing tries again: the node stays connected with an empty routing table, and its own lookups
 * wait for a peer in it until they time out (bench dht: 1–2 of 5 joiners of a 30–100 peer swarm in
 * one process, their one connection to a DHT server). So a node whose table is empty identifies
 * again the peers whose identify never finished and adds its connected DHT servers again, giving
 * each step `timeoutMs`. Whether identify finished is what identify reported (`servesDht`), not the
 * peer store's protocol list: the peer's own streams to this node (its identify of this node, its
 * pings) fill that list without saying whether the peer serves the DHT. Resolves whether the table
 * holds a peer.
 */
async function refillRoutingTable(libp2p: Libp2p, dht: KadDHT, identifyService: Identify, servesDht: (peer: PeerId) => boolean | undefined, timeoutMs: number, stopping: AbortSignal, log: pino.Logger): Promise<boolean> {
  const table = routingTable(dht);
  if (table.size > 0) return true;
  const signal = AbortSignal.any([stopping, AbortSignal.timeout(timeoutMs)]);
  await Promise.all(
    libp2p.getConnections().map(async (connection) => {
      const peer = connection.remotePeer;
      try {
        if (servesDht(peer) === undefined) await identifyService.identify(connection, { signal });
        if (servesDht(peer) === true) await table.add(peer, { signal });
      } catch (err) {
        log.debug({ peer: peer.toString(), err: (err as Error).message }, 'routing table still empty: the peer did not answer');
      }
    }),
  );
  if (table.size > 0) log.info(`routing table was empty while connected: refilled from ${table.size} connected DHT server(s)`);
  return table.size > 0;
}

async function serverJoinLookups(dht: KadDHT, self: PeerId, stopping: AbortSignal, log: pino.Logger): Promise<void> {
  for (const delay of SERVER_JOIN_LOOKUP_DELAYS_MS) {
    try {
      await sleep(delay, undefined, { signal: stopping });
    } catch {
      return; // stopping
    }
    await joinLookup(dht, self, stopping, log);
  }
}

/** Logs, once, the first relayed address this node gets: where others reach a client-mode node. */
function logFirstRelayAddress(libp2p: Libp2p, log: pino.Logger): void {
  const onUpdate = (): void => {
    const relayed = libp2p.getMultiaddrs().find((a) => a.toString().includes('/p2p-circuit'));
    if (relayed === undefined) return;
    libp2p.removeEventListener('self:peer:update', onUpdate);
    log.info(`client mode: reachable through the relay at ${relayed.toString()}`);
  };
  libp2p.addEventListener('self:peer:update', onUpdate);
}

/**
 * mDNS only announces peers; connecting is ours to do. The service tag is per run, so only peers of
 * the same run answer (and a closed swarm's PSK still refuses outsiders).
 */
function dialMdnsPeers(libp2p: Libp2p, log: pino.Logger): void {
  const service = (libp2p.services as { mdns?: EventTarget }).mdns;
  service?.addEventListener('peer', (event) => {
    const { id } = (event as CustomEvent<{ id: PeerId }>).detail;
    if (id.equals(libp2p.peerId) || libp2p.getConnections(id).length > 0) return;
    log.debug({ peer: id.toString() }, 'mDNS found a peer of this run on the local network; connecting');
    libp2p.dial(id, { signal: AbortSignal.timeout(BOOTSTRAP_DIAL_TIMEOUT_MS) }).catch((err: unknown) => log.debug({ peer: id.toString(), err: (err as Error).message }, 'mDNS peer did not answer'));
  });
}

/** `_cohort-<16 hex of SHA-256(run id)>._udp.local`: a valid DNS label whatever the run id holds. */
export function mdnsServiceTag(runId: string): string {
  return `_cohort-${sha256(Buffer.from(runId)).toString('hex').slice(0, 16)}._udp.local`;
}

function dialTarget(peer: PeerId | Multiaddr | string): PeerId | Multiaddr {
  if (typeof peer !== 'string') return peer;
  return peer.startsWith('/') ? multiaddr(peer) : peerIdFromString(peer);
}

function describeConnection(c: Connection): SwarmStats['connections'][number] {
  return { peer: c.remotePeer.toString(), remoteAddr: c.remoteAddr.toString(), direction: c.direction, limited: c.limits !== undefined };
}

/** A closest-servers lookup slower than this says, at debug level, where its time went. */
const SLOW_LOOKUP_MS = 2000;

/**
 * The `count` DHT servers nearest to the key (XOR distance of SHA-256 ids, as Kademlia). The lookup
 * ends as soon as the `count` nearest servers known have all answered and no server still to be
 * asked is nearer (Kademlia's termination for `count`): kad-dht's own query goes on until its k
 * nearest (kBucketSize) answered on every one of its 10 disjoint paths (alpha), asking (and
 * dialing) more peers than a store needs.
 */
async function closestPeers(libp2p: Libp2p, dht: KadDHT, table: RoutingTable, isServer: (peer: PeerId) => boolean, key: Uint8Array, count: number, log: pino.Logger): Promise<PeerId[]> {
  const started = Date.now();
  const errors: string[] = [];
  const target = sha256(key);
  const distances = new Map<string, Buffer>();
  const distance = (id: PeerId): Buffer => {
    const text = id.toString();
    let d = distances.get(text);
    if (d === undefined) distances.set(text, (d = xor(sha256(id.toMultihash().bytes), target)));
    return d;
  };
  const nearest = (peers: Iterable<PeerId>): PeerId[] => [...peers].sort((a, b) => Buffer.compare(distance(a), distance(b))).slice(0, count);
  const found = new Map<string, PeerId>();
  // The query's answers plus the servers we are connected to: in a young swarm the query can end
  // before the peers it asked know every server.
  for (const id of libp2p.getPeers().filter(isServer)) found.set(id.toString(), id);
  // a node with no connection and an empty routing table has nobody to ask: the query would only wait out
  // its timeout (a swarm's first node paid 10 s for every record it stored or read). A node that is
  // connected still asks, since its routing table fills once identify has run
  if (table.size > 0 || libp2p.getPeers().length > 0) {
    // servers named by an answer and not asked yet; kad-dht asks only those nearer than who named them
    const unasked = new Map<string, PeerId>();
    const answered = new Set<string>();
    const signal = AbortSignal.timeout(CLOSEST_PEERS_TIMEOUT_MS);
    try {
      for await (const event of dht.getClosestPeers(key, { signal })) {
        if (event.name === 'PEER_RESPONSE') {
          const from = event.from.toString();
          unasked.delete(from);
          answered.add(from);
          found.set(from, event.from);
          for (const { id } of event.closer) {
            const text = id.toString();
            if (!found.has(text) && !id.equals(libp2p.peerId) && Buffer.compare(distance(id), distance(event.from)) < 0) unasked.set(text, id);
          }
        } else if (event.name === 'QUERY_ERROR' && event.from !== undefined) {
          unasked.delete(event.from.toString());
          errors.push(`${event.from.toString().slice(-8)} after ${Date.now() - started} ms: ${event.error.message}`);
        } else if (event.name === 'FINAL_PEER') {
          found.set(event.peer.id.toString(), event.peer.id);
        }
        const best = nearest(found.values());
        // leaving the loop aborts the query's requests still in flight
        if (best.length === count && best.every((id) => answered.has(id.toString())) && [...unasked.values()].every((id) => Buffer.compare(distance(id), distance(best.at(-1)!)) > 0)) break;
      }
    } catch (err) {
      // A lookup that ran out of time (a routing table still empty, peers that never answer) keeps
      // what it found: the connected servers and those that answered. Throwing lost them all, and a
      // record was then stored nowhere after 10 s.
      if (!signal.aborted) throw err;
    }
  }
  const closest = nearest(found.values());
  if (Date.now() - started > SLOW_LOOKUP_MS) log.debug({ ms: Date.now() - started, found: closest.length, count, routingTable: table.size, errors }, 'slow closest-servers lookup');
  return closest;
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
      'check the addresses or join code, that those peers are running, and that a firewall does not block them.' +
      // a node that accepts connections is still useful: others can reach it; a private one reaches nobody
      (cfg.reachability === 'private' ? '' : ' This node keeps running and can be joined by others.'),
  );
}
