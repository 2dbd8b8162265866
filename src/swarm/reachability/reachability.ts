import type { Libp2p, PeerId } from '@libp2p/interface';
import { CODE_P2P, type Multiaddr } from '@multiformats/multiaddr';
import type { Logger } from '../../log/logger.js';
import { DIALBACK_MIN_INTERVAL_MS, DIALBACK_PROBE_PEERS, DIALBACK_REQUEST_TIMEOUT_MS, REACHABILITY_REFRESH_MS, type ReachabilityMode } from '../constants.js';
import { askDialback, type DialbackAnswer } from './dialback.js';

/** What this node knows about its own reachability: `unknown` until a probe (or the configuration) decides. */
export type Reachability = 'unknown' | 'public' | 'private';

export interface ReachabilityComponents {
  readonly libp2p: Pick<Libp2p, 'getMultiaddrs' | 'getConnections' | 'dialProtocol' | 'addEventListener' | 'removeEventListener'>;
  /** The dial-back protocol id; peers announcing it in identify can be asked. */
  readonly protocol: string;
  readonly mode: ReachabilityMode;
  readonly log: Logger;
  /** Switches the node's services to the decided state; called once per change. */
  apply(state: Reachability): Promise<void>;
}

/** The verdict of one probe. */
export interface ProbeOutcome {
  readonly decided: 'public' | 'private' | undefined;
  readonly ok: ReadonlyArray<{ readonly peer: string; readonly addr: string }>;
  readonly failed: ReadonlyArray<{ readonly peer: string; readonly reason: string }>;
  /** Peers that gave no verdict (refused, no answer). */
  readonly silent: number;
}

/**
 * Decides, in auto mode, whether this node is publicly reachable, AutoNAT-style: DHT servers of the
 * run dial it back on its advertised TCP addresses. Until a majority says it is reachable it stays
 * a DHT client (a node behind NAT must never advertise itself as a server); the first peer of a
 * swarm (no initial peers) has nobody to ask and serves, since it is the bootstrap.
 */
export class ReachabilityService {
  private current: Reachability;
  private readonly servers = new Set<string>();
  private readonly askedAt = new Map<string, number>();
  private probing: Promise<void> | undefined;
  private rerun = false;
  private started = false;
  /** Serving because none of the initial peers answered, not because anyone dialed back: the first server met is asked. */
  private unconfirmed = false;
  private refreshTimer: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();

  constructor(private readonly c: ReachabilityComponents) {
    this.current = c.mode === 'auto' ? 'unknown' : c.mode;
    // Listening from the start: the servers met during bootstrap are the first to ask.
    c.libp2p.addEventListener('peer:identify', this.onIdentify);
  }

  get state(): Reachability {
    return this.current;
  }

  /**
   * Once bootstrap ended (auto mode; forced modes never probe), `reached` of its `initialPeers`
   * having answered: probe now, again when new servers appear while undecided, and every refresh.
   */
  start(initialPeers: number, reached: number): void {
    if (this.c.mode !== 'auto') return;
    this.started = true;
    this.refreshTimer = setInterval(() => this.probe(), REACHABILITY_REFRESH_MS);
    this.refreshTimer.unref();
    if (reached === 0) {
      // Nobody to ask. Peers that join through this node find each other's records only if it serves:
      // with its initial peers gone too (a run whose coordinator is down and whose peers restart with
      // its join code), each would otherwise stay a client waiting for a server that never comes.
      // Unasked, so the first server met is asked after all.
      this.unconfirmed = initialPeers > 0;
      // a node whose initial peers did not answer is no bootstrap: it serves in their stead until one is met
      const why =
        initialPeers === 0
          ? 'no initial peers, so nobody can dial us back yet: this node is the bootstrap of the swarm; serving the DHT'
          : `none of the ${initialPeers} initial peer(s) answered, so nobody can dial us back yet: serving the DHT meanwhile, so that peers joining through this node find each other; the first server met is asked to confirm`;
      // Tracked like a probe, so that stop() waits for the switch to finish.
      this.probing = this.decide('public', `AutoNAT: ${why}`).finally(() => {
        this.probing = undefined;
      });
      return;
    }
    this.probe();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    clearInterval(this.refreshTimer);
    this.c.libp2p.removeEventListener('peer:identify', this.onIdentify);
    await this.probing;
  }

  private readonly onIdentify = (event: CustomEvent<{ peerId: PeerId; protocols: string[] }>): void => {
    const id = event.detail.peerId.toString();
    if (!event.detail.protocols.includes(this.c.protocol)) {
      this.servers.delete(id);
      return;
    }
    const fresh = !this.servers.has(id);
    this.servers.add(id);
    if (fresh && (this.current === 'unknown' || this.unconfirmed)) this.probe();
  };

  /** Starts a probe, or schedules one more after the running one. */
  private probe(): void {
    if (!this.started || this.stopping.signal.aborted) return;
    if (this.probing) {
      this.rerun = true;
      return;
    }
    this.probing = this.runProbe()
      .catch((err: unknown) => this.c.log.warn({ err: (err as Error).message }, 'AutoNAT probe failed'))
      .finally(() => {
        this.probing = undefined;
        if (this.rerun) {
          this.rerun = false;
          this.probe();
        }
      });
  }

  private async runProbe(): Promise<void> {
    const addrs = directTcpAddrs(this.c.libp2p.getMultiaddrs());
    if (addrs.length === 0) {
      await this.decide('private', 'AutoNAT: no TCP address to be dialed on (listening nowhere); client mode, reachable through relays');
      return;
    }
    const now = Date.now();
    const candidates = this.connectedServers().filter((peer) => now - (this.askedAt.get(peer.toString()) ?? -Infinity) >= DIALBACK_MIN_INTERVAL_MS);
    const asked = candidates.slice(0, DIALBACK_PROBE_PEERS);
    if (asked.length === 0) return;
    for (const peer of asked) this.askedAt.set(peer.toString(), now);
    const signal = AbortSignal.any([this.stopping.signal, AbortSignal.timeout(DIALBACK_REQUEST_TIMEOUT_MS)]);
    const answers = await Promise.allSettled(asked.map((peer) => askDialback(this.c.libp2p, this.c.protocol, peer, addrs, signal)));
    if (this.stopping.signal.aborted) return;
    const outcome = tally(
      asked.map((p) => p.toString()),
      answers,
    );
    const where = addrs.map(String).join(', ');
    if (outcome.decided !== undefined) this.unconfirmed = false;
    if (outcome.decided === 'public') {
      await this.decide('public', `AutoNAT: ${outcome.ok.length} of ${asked.length} peer(s) dialed us back at ${[...new Set(outcome.ok.map((o) => o.addr))].join(', ')}; serving the DHT`);
    } else if (outcome.decided === 'private') {
      await this.decide('private', `AutoNAT: not reachable at ${where} (${outcome.failed.map((f) => `${f.peer}: ${f.reason}`).join('; ')}); client mode, reachable through relays`);
    } else {
      this.c.log.info(`AutoNAT: no verdict yet (${outcome.ok.length} reached us, ${outcome.failed.length} could not, ${outcome.silent} gave no answer); staying a DHT client until more peers answer`);
    }
  }

  private async decide(state: 'public' | 'private', message: string): Promise<void> {
    if (state === this.current) return;
    this.current = state;
    this.c.log.info(message);
    await this.c.apply(state);
  }

  /** Connected peers serving dial-back, over a direct (not relayed) connection. */
  private connectedServers(): PeerId[] {
    const seen = new Map<string, PeerId>();
    for (const c of this.c.libp2p.getConnections()) {
      const id = c.remotePeer.toString();
      if (c.limits === undefined && c.status === 'open' && this.servers.has(id)) seen.set(id, c.remotePeer);
    }
    return [...seen.values()];
  }
}

/**
 * Majority of the verdicts, with at least 2 of them (1 when only one peer was asked); refusals and
 * silence count neither way; a tie decides nothing.
 */
export function tally(peers: readonly string[], answers: ReadonlyArray<PromiseSettledResult<DialbackAnswer>>): ProbeOutcome {
  const ok: Array<{ peer: string; addr: string }> = [];
  const failed: Array<{ peer: string; reason: string }> = [];
  answers.forEach((answer, i) => {
    if (answer.status !== 'fulfilled') return;
    const peer = peers[i]!;
    if (answer.value.t === 'ok') ok.push({ peer, addr: answer.value.a });
    else if (answer.value.t === 'failed') failed.push({ peer, reason: answer.value.reason });
  });
  const verdicts = ok.length + failed.length;
  const enough = verdicts >= Math.min(2, peers.length);
  const decided = !enough || ok.length === failed.length ? undefined : ok.length > failed.length ? 'public' : 'private';
  return { decided, ok, failed, silent: peers.length - verdicts };
}

/** This node's direct TCP addresses (no relay hop, no /p2p suffix): what peers are asked to dial. */
function directTcpAddrs(addrs: readonly Multiaddr[]): Multiaddr[] {
  return addrs
    .map((a) => a.decapsulateCode(CODE_P2P))
    .filter((a) => {
      const names = a.getComponents().map((c) => c.name);
      return (names[0] === 'ip4' || names[0] === 'ip6') && names[1] === 'tcp' && names.length === 2;
    });
}
