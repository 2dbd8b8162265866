/** Limits and timeouts of the swarm layer, with units in the names. See docs/protocol.md. */

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;

/** Version of the Cohort wire protocols; bumped on any incompatible change of a message schema. */
export const PROTOCOL_VERSION = '1.0.0';

/** A run id names one training run (one swarm): short, URL- and multiaddr-safe. */
export const RUN_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** Clock skew tolerated between peers (hivemind tolerates ~3 s): a record that expired less than this long ago is still accepted for storage. */
export const CLOCK_SKEW_MS = 3 * second;
/**
 * The record namespaces of the protocol (a key's first path segment), each with the longest lifetime
 * its use needs: what a peer can pin into others' memory. A holder refuses an entry of any other
 * namespace (`unknown-namespace`) or living longer (`ttl-too-long`); a layer registers only these.
 */
export const RECORD_NAMESPACE_TTL_MS: Readonly<Record<string, number>> = {
  /** Progress: republished every few seconds, lives `metadata_expiration` (default 120 s). */
  progress: hour,
  /** The run's parameters: republished, each copy lives 1 h. */
  run: 2 * hour,
  /** A coordinator's leaderboard: lives 10 min. */
  leaderboard: 30 * minute,
  /** Matchmaking declarations: live `averaging_expiration` (seconds). */
  averaging: 10 * minute,
  /** State advertisements: live 3 advertisement intervals (30 s). */
  state: 10 * minute,
  /** Shard holdings (src/shards): live 3 advertisement intervals (3 min by default). */
  shards: 30 * minute,
};

/** Longest DHT key (UTF-8 bytes, without the run prefix). */
export const MAX_KEY_BYTES = 256;
/** Longest subkey (UTF-8 bytes). */
export const MAX_SUBKEY_BYTES = 128;
/** Default largest value (CBOR bytes) of a namespace; a namespace may ask for less or more up to MAX_VALUE_BYTES_LIMIT. */
export const DEFAULT_MAX_VALUE_BYTES = 16 * 1024;
export const MAX_VALUE_BYTES_LIMIT = 256 * 1024;
/** Per key: the total size of all entries and the number of subkeys one owner may hold. */
export const MAX_KEY_TOTAL_BYTES = 1024 * 1024;
export const MAX_SUBKEYS_PER_OWNER = 16;
/** All records a peer holds for others (bytes): past this, new keys are refused. */
export const MAX_STORE_TOTAL_BYTES = 64 * 1024 * 1024;
/**
 * Quotas of a holder: bytes one owner may hold in all keys (an honest peer holds a few KiB: its
 * progress, declarations, advertisement), and bytes the entries sent from one address (IP, or the
 * peer id behind a relay) may hold, whoever signed them (many identities on one machine).
 */
export const MAX_OWNER_BYTES = 256 * 1024;
export const MAX_SOURCE_BYTES = 8 * 1024 * 1024;
/** Largest `found` answer's entries, CBOR-encoded: a holder keeps each owner's entries in turn until this is reached. */
export const MAX_ANSWER_BYTES = 1024 * 1024;
/** Largest records-protocol message: a get answer, plus framing. */
export const MAX_MESSAGE_BYTES = MAX_ANSWER_BYTES + 64 * 1024;
/** Entries in one store request. */
export const MAX_ENTRIES_PER_REQUEST = 64;

/** Replicas: how many of the DHT servers closest to a key receive each store. */
export const DEFAULT_REPLICATION = 5;
/** One records request/response exchange with one peer. */
export const RECORDS_REQUEST_TIMEOUT_MS = 5 * second;
/** Finding the peers closest to a key. */
export const CLOSEST_PEERS_TIMEOUT_MS = 10 * second;
/**
 * How long a key's closest servers, once looked up, serve its stores and gets without a new lookup.
 * A training peer reads its progress key every few seconds near an epoch's end (at least every
 * `maxRefresh`, 30 s) and stores it as often; churn of a quarter of the swarm per 10 minutes
 * replaces one of a key's 10 closest servers about every 4 minutes, so an entry is rarely out of
 * date: a server that left is noticed (no connection, or no answer) and looked up again at once, and
 * a server that became closest gets the key's stores from the next lookup, within this time.
 */
export const CLOSEST_SERVERS_CACHE_MS = 30 * second;
/** Keys whose closest servers are kept (a peer uses a handful: progress, its epoch's averaging keys, state). */
export const CLOSEST_SERVERS_CACHE_ENTRIES = 256;
/**
 * Entries whose signatures a peer remembers having verified (VerifiedSignatures): a read gets the same
 * entries from every server it asks and again at every poll, e.g. 32 peers' matchmaking declarations
 * from 6 servers 4 times a second. Several rounds' declarations and progress reports of a few hundred
 * peers fit.
 */
export const VERIFIED_SIGNATURES_CACHE_ENTRIES = 4096;
/** Requests one remote peer may make to the records protocol: points per window. */
export const RECORDS_RATE_LIMIT = { points: 200, durationSeconds: 1 } as const;
/** How often expired records are evicted. */
export const EVICTION_INTERVAL_MS = 5 * second;

/** Bootstrap: attempts per initial peer and the backoff between attempts (doubles up to the max). */
export const BOOTSTRAP_ATTEMPTS = 5;
export const BOOTSTRAP_BACKOFF_INITIAL_MS = 500;
export const BOOTSTRAP_BACKOFF_MAX_MS = 8 * second;
export const BOOTSTRAP_DIAL_TIMEOUT_MS = 5 * second;

/**
 * Reachability (auto mode): a dial-back probe asks up to DIALBACK_PROBE_PEERS DHT servers to dial
 * this node; the majority of their verdicts decides (at least 2 answers unless only one server is
 * connected). Probes repeat every REACHABILITY_REFRESH_MS to follow network changes.
 */
export const DIALBACK_PROBE_PEERS = 3;
/** One dial-back request, and the server's dial inside it (shorter, so the verdict arrives in time). */
export const DIALBACK_REQUEST_TIMEOUT_MS = 15 * second;
export const DIALBACK_DIAL_TIMEOUT_MS = 5 * second;
/** A server answers one dial-back request per peer per this interval (each costs it outbound dials). */
export const DIALBACK_MIN_INTERVAL_MS = 30 * second;
/** Addresses (ports) one request may name, and the server dials at most. */
export const DIALBACK_MAX_ADDRS = 4;
export const REACHABILITY_REFRESH_MS = 15 * minute;
/**
 * Least time libp2p's connection monitor gives a ping before it drops the connection (libp2p: 5 s).
 * An all-reduce keeps a few MiB per stream queued on the uplink and a ping waits behind them: on a
 * volunteer's 10 Mbit/s uplink that is over 5 s, and the connection would drop in the middle of a round.
 */
export const PING_TIMEOUT_MIN_MS = 30_000;
/**
 * How often libp2p's connection monitor pings each connection (libp2p: 10 s), both ends, each ping a
 * new stream. yamux's keep-alive (every 30 s) already keeps an idle connection and its NAT mapping
 * open, so the ping only finds dead connections: one whose peer vanished is dropped within 90 s
 * (with PING_TIMEOUT_MIN_MS). With 10 s, among 50 peers in one process (about 1200 connection ends)
 * the pings were half the CPU of starting the swarm (bench dht).
 */
export const CONNECTION_PING_INTERVAL_MS = 60 * second;
/** identify-push batches our protocol changes (a node starting to serve handles several) this long. */
export const IDENTIFY_PUSH_DEBOUNCE_MS = 100;
/** A node that just turned DHT server looks itself up after each of these delays (the first: a few push debounces). */
export const SERVER_JOIN_LOOKUP_DELAYS_MS: readonly number[] = [500, 3 * second];

/** `auto`: probe (AutoNAT); `public`/`private`: forced (`private` is hivemind's client mode). See reachability/reachability.ts. */
export type ReachabilityMode = 'auto' | 'public' | 'private';
export const REACHABILITY_MODES: readonly ReachabilityMode[] = ['auto', 'public', 'private'];

/**
 * How connections are secured. 'native-tls': direct TCP connections run TLS 1.3 in Node on the socket
 * (src/swarm/tls-tcp.ts, tls-tcp/1), relayed ones negotiate TLS or Noise. 'tls' / 'noise': standard
 * libp2p, @libp2p/tcp with /tls/1.0.0 and Noise both offered and the named one first (interoperates with
 * other libp2p implementations and with Cohort before tls-tcp/1, at a fraction of the throughput).
 */
export const ENCRYPTIONS = ['native-tls', 'tls', 'noise'] as const;
/**
 * Standard libp2p TLS by default: 'native-tls' measured up to 4× the all-reduce throughput, but an
 * 8-peer bench allreduce crashed a peer in SSL_read (SIGSEGV) until its resets were deferred, and
 * that fix has too few runs behind it to put every volunteer on it (docs/protocol.md, tls-tcp/1).
 */
export const DEFAULT_ENCRYPTION: (typeof ENCRYPTIONS)[number] = 'tls';
/** ALPN of direct TLS connections: the libp2p TLS spec's value for "muxer negotiated afterwards". */
export const TLS_TCP_ALPN = 'libp2p';
/** An inbound TCP connection has this long to complete its TLS handshake (libp2p's inbound upgrade timeout starts after it). */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10 * second;
/** A node's TLS certificate, reused for every connection, is made again once it has less than this to live (peers refuse an expired one). */
export const TLS_CERT_RENEW_BEFORE_MS = 24 * hour;
/** A direct connection with no traffic for this long is closed (libp2p's TCP transport: 2 min). */
export const TCP_INACTIVITY_TIMEOUT_MS = 2 * minute;

/** How often `cohort swarm start` writes its stats into the store's metrics (hivemind's monitor logs every ~30 s). */
export const STATS_RECORD_INTERVAL_MS = 30 * second;

/**
 * How often a node checks that it still has a connection; one with none redials its initial peers.
 * A node alone never hears of the swarm again: nobody dials a DHT client, and its lookups have nobody
 * to ask (the swarm lab: a peer whose connections all dropped on a loaded machine trained alone).
 */
export const REJOIN_CHECK_MS = 5 * second;
/**
 * Longest a node with an empty routing table waits for a connected peer's identify or ping answer
 * before it tries again; the wait starts at REJOIN_CHECK_MS and doubles each time it was too short.
 * Under a loaded machine's backlog answers took 5–6 s (bench dht, 60 peers in one process given a
 * sixth of a core), and a joiner stays unroutable until one arrives in time.
 */
export const ROUTING_REFILL_MAX_TIMEOUT_MS = 40 * second;
