import type { Connection, Libp2p, PeerId, Stream } from '@libp2p/interface';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { z } from 'zod';
import type { Logger } from '../../log/logger.js';
import { decodeCbor, encodeCbor } from '../cbor-message.js';
import { answerOnce, requestOnce } from '../streams.js';
import { DIALBACK_DIAL_TIMEOUT_MS, DIALBACK_MAX_ADDRS, DIALBACK_MIN_INTERVAL_MS, DIALBACK_REQUEST_TIMEOUT_MS } from '../constants.js';

/**
 * The dial-back protocol `/cohort/<run>/dialback/1.0.0` (AutoNAT v1's idea): a peer asks a DHT
 * server to open a new connection to its addresses; the answer says whether that worked. The
 * server only dials the IP address the request came from (so nobody can aim it at a third party),
 * and when none of the requester's addresses is on that IP (a NAT'd peer knows only its LAN
 * address), it tries that IP with the requester's listening ports — a forwarded port.
 */
const requestSchema = z.strictObject({ t: z.literal('dial'), a: z.array(z.instanceof(Uint8Array)).min(1).max(DIALBACK_MAX_ADDRS) });
const responseSchema = z.discriminatedUnion('t', [
  /** Dialed back at this address. */
  z.strictObject({ t: z.literal('ok'), a: z.string().max(300) }),
  /** Every dial failed: the requester is not reachable from here. */
  z.strictObject({ t: z.literal('failed'), reason: z.string().max(300) }),
  /** No verdict (rate limit, relayed connection, nothing to dial): counts neither way. */
  z.strictObject({ t: z.literal('refused'), reason: z.string().max(300) }),
]);
type DialbackRequest = z.infer<typeof requestSchema>;
export type DialbackAnswer = z.infer<typeof responseSchema>;

const MAX_MESSAGE_BYTES = 4096;

function decode<T>(schema: z.ZodType<T>, bytes: Uint8Array, what: string): T {
  return decodeCbor(schema, bytes, what, (message, cause) => new TypeError(message, cause === undefined ? undefined : { cause }));
}

/** Asks `peer` to dial us back at `addrs` (TCP multiaddrs without /p2p). Throws when the peer does not answer. */
export async function askDialback(libp2p: Pick<Libp2p, 'dialProtocol'>, protocol: string, peer: PeerId, addrs: readonly Multiaddr[], signal: AbortSignal): Promise<DialbackAnswer> {
  const request = encodeCbor({ t: 'dial', a: addrs.slice(0, DIALBACK_MAX_ADDRS).map((a) => a.bytes) } satisfies DialbackRequest);
  return requestOnce(libp2p, peer, protocol, request, (bytes) => decode(responseSchema, bytes, `dial-back answer from ${peer.toString()}`), { maxBytes: MAX_MESSAGE_BYTES, signal });
}

export class DialbackServer {
  private readonly lastRequest = new Map<string, number>();

  constructor(
    private readonly libp2p: Pick<Libp2p, 'dial'>,
    private readonly log: Logger,
  ) {}

  async onStream(stream: Stream, connection: Connection): Promise<void> {
    const signal = AbortSignal.timeout(DIALBACK_REQUEST_TIMEOUT_MS);
    try {
      await answerOnce(stream, async (bytes) => encodeCbor(await this.answer(bytes, connection, signal)), { maxBytes: MAX_MESSAGE_BYTES, signal });
    } catch (err) {
      this.log.debug({ peer: connection.remotePeer.toString(), err: (err as Error).message }, 'dial-back request failed');
      stream.abort(err as Error);
    }
  }

  private async answer(bytes: Uint8Array, connection: Connection, signal: AbortSignal): Promise<DialbackAnswer> {
    const peer = connection.remotePeer;
    if (connection.limits !== undefined) return { t: 'refused', reason: 'relayed connection' };
    const now = Date.now();
    const last = this.lastRequest.get(peer.toString());
    if (last !== undefined && now - last < DIALBACK_MIN_INTERVAL_MS) return { t: 'refused', reason: 'rate-limited' };
    this.lastRequest.set(peer.toString(), now);
    for (const [id, at] of this.lastRequest) if (now - at >= DIALBACK_MIN_INTERVAL_MS) this.lastRequest.delete(id);

    let request: DialbackRequest;
    try {
      request = decode(requestSchema, bytes, `dial-back request from ${peer.toString()}`);
    } catch (err) {
      return { t: 'refused', reason: (err as Error).message.slice(0, 300) };
    }
    const targets = dialTargets(request.a, connection.remoteAddr);
    if (targets.length === 0) return { t: 'refused', reason: 'no TCP address to dial' };
    const errors: string[] = [];
    for (const target of targets) {
      const full = target.encapsulate(`/p2p/${peer.toString()}`);
      try {
        // A new connection: the one the request came on proves nothing about inbound reachability.
        const back = await this.libp2p.dial(full, { force: true, signal: AbortSignal.any([signal, AbortSignal.timeout(DIALBACK_DIAL_TIMEOUT_MS)]) });
        await back.close().catch((err: unknown) => back.abort(err as Error));
        return { t: 'ok', a: target.toString() };
      } catch (err) {
        errors.push(`${target.toString()}: ${(err as Error).message}`);
      }
    }
    return { t: 'failed', reason: errors.join('; ').slice(0, 300) };
  }
}

/**
 * What the server dials: the requester's TCP addresses on the IP its request came from; if it named
 * none there, that IP with the ports it named (at most DIALBACK_MAX_ADDRS in all).
 */
export function dialTargets(raw: readonly Uint8Array[], remoteAddr: Multiaddr): Multiaddr[] {
  const remote = tcpHostPort(remoteAddr);
  if (remote === undefined) return [];
  const named: Array<{ family: 'ip4' | 'ip6'; host: string; port: number }> = [];
  for (const bytes of raw) {
    try {
      const parsed = tcpHostPort(multiaddr(bytes));
      if (parsed !== undefined) named.push(parsed);
    } catch {
      // not a multiaddr: ignored like any address we cannot dial
    }
  }
  const sameHost = named.filter((a) => a.family === remote.family && a.host === remote.host);
  const ports = sameHost.length > 0 ? sameHost.map((a) => a.port) : named.map((a) => a.port);
  return [...new Set(ports)].slice(0, DIALBACK_MAX_ADDRS).map((port) => multiaddr(`/${remote.family}/${remote.host}/tcp/${port}`));
}

function tcpHostPort(addr: Multiaddr): { family: 'ip4' | 'ip6'; host: string; port: number } | undefined {
  const [ip, tcp, ...rest] = addr.getComponents();
  if (ip === undefined || tcp === undefined || (ip.name !== 'ip4' && ip.name !== 'ip6') || tcp.name !== 'tcp' || ip.value === undefined) return undefined;
  if (rest.some((c) => c.name !== 'p2p')) return undefined; // relayed or other transports
  const port = Number(tcp.value);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return undefined;
  return { family: ip.name, host: ip.value, port };
}
