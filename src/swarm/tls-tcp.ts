import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';
import { AbortError, InvalidCryptoExchangeError, TimeoutError, UnexpectedPeerError, serviceCapabilities, transportSymbol } from '@libp2p/interface';
import type {
  AbortOptions,
  ComponentLogger,
  Connection,
  CreateListenerOptions,
  DialTransportOptions,
  Listener,
  ListenerEvents,
  Logger,
  PeerId,
  Transport,
  Upgrader,
} from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { verifyPeerCertificate } from '@libp2p/tls/utils';
import { AbstractMultiaddrConnection, getNetConfig, getThinWaistAddresses, ipPortToMultiaddr } from '@libp2p/utils';
import type { Multiaddr } from '@multiformats/multiaddr';
// libp2p's own event emitter (its Listener type is a TypedEventTarget of this package)
import { TypedEventEmitter } from 'main-event';
import { TLS_HANDSHAKE_TIMEOUT_MS, TLS_TCP_ALPN, TCP_INACTIVITY_TIMEOUT_MS } from './constants.js';
import type { TlsCredentials } from './tls-credentials.js';

/**
 * Direct connections: TCP with TLS 1.3 run by Node's own TLS on the socket (OpenSSL on the TCP
 * handle: no JavaScript stream between the socket and the cipher), then yamux as usual. Peers are
 * authenticated as libp2p's /tls/1.0.0 does it (the libp2p TLS spec's self-signed certificate
 * carrying the peer's key and its signature over the certificate's key; @libp2p/tls's code), but
 * the handshake starts at the first byte instead of after a multistream-select of /tls/1.0.0, and
 * the upgrader only adds the muxer (`skipEncryption`). @libp2p/tls itself runs OpenSSL behind a
 * JavaScript Duplex over the connection: a quarter of an all-reduce's CPU went there.
 */
export interface TlsTcpInit {
  /** The node's certificate, shared with its encrypter for relayed connections. */
  readonly credentials: TlsCredentials;
  /** Where handshakes that fail on the listener are told (an older peer speaking plain TCP, a scanner). */
  readonly onInboundError?: (remote: string, err: Error) => void;
}

interface TlsTcpComponents {
  readonly logger: ComponentLogger;
}

export function tlsTcp(init: TlsTcpInit): (components: TlsTcpComponents) => Transport {
  return (components) => new TlsTcp(components, init);
}

class TlsTcp implements Transport {
  readonly [transportSymbol] = true;
  readonly [Symbol.toStringTag] = 'cohort/tls-tcp';
  readonly [serviceCapabilities] = ['@libp2p/transport'];
  readonly #credentials: TlsCredentials;
  readonly #log: Logger;

  constructor(
    components: TlsTcpComponents,
    private readonly init: TlsTcpInit,
  ) {
    this.#credentials = init.credentials;
    this.#log = components.logger.forComponent('cohort:tls-tcp');
  }

  async dial(ma: Multiaddr, options: DialTransportOptions): Promise<Connection> {
    const expected = expectedPeer(ma);
    const context = await this.#credentials.context('client');
    const raw = await connect(ma, options.signal);
    let secured: Secured;
    try {
      secured = await handshake(tls.connect({ socket: raw, secureContext: context, rejectUnauthorized: false, ALPNProtocols: [TLS_TCP_ALPN] }), 'client', expected, options.signal);
    } catch (err) {
      raw.destroy();
      throw new InvalidCryptoExchangeError(`TLS handshake with ${ma.toString()} failed: ${handshakeError(err)}`);
    }
    const maConn = new TlsSocketConnection(secured.socket, { remoteAddr: ma, direction: 'outbound', log: this.#log.newScope('connection') });
    try {
      return await options.upgrader.upgradeOutbound(maConn, { ...options, skipEncryption: true, remotePeer: secured.remotePeer });
    } catch (err) {
      maConn.abort(err as Error);
      throw err;
    }
  }

  createListener(options: CreateListenerOptions): Listener {
    return new TlsTcpListener(options.upgrader, this.#credentials, this.#log, this.init);
  }

  listenFilter = (addrs: Multiaddr[]): Multiaddr[] => addrs.filter(isTcpAddr);
  dialFilter = (addrs: Multiaddr[]): Multiaddr[] => addrs.filter(isTcpAddr);
}

/** `/ip4|ip6|dns|dns4|dns6/<host>/tcp/<port>`, optionally with `/p2p/<id>`: no relay hop, no other layer. */
function isTcpAddr(ma: Multiaddr): boolean {
  const names = ma.getComponents().map((c) => c.name);
  if (names.at(-1) === 'p2p') names.pop();
  return names.length === 2 && ['ip4', 'ip6', 'dns', 'dns4', 'dns6'].includes(names[0]!) && names[1] === 'tcp';
}

function expectedPeer(ma: Multiaddr): PeerId | undefined {
  const id = ma.getComponents().findLast((c) => c.name === 'p2p')?.value;
  return id === undefined ? undefined : peerIdFromString(id);
}

async function connect(ma: Multiaddr, signal: AbortSignal): Promise<net.Socket> {
  signal.throwIfAborted();
  const config = getNetConfig(ma);
  if (config.port === undefined) throw new RangeError(`${ma.toString()} has no TCP port`);
  const socket = net.connect({ host: config.host, port: config.port, noDelay: true, keepAlive: true });
  try {
    await once(socket, 'connect', { signal });
    return socket;
  } catch (err) {
    socket.destroy();
    if (signal.aborted) throw new AbortError(`dial to ${ma.toString()} aborted before TCP connected`);
    throw new Error(`TCP connection to ${ma.toString()} failed: ${(err as Error).message}`, { cause: err });
  }
}

interface Secured {
  readonly socket: tls.TLSSocket;
  readonly remotePeer: PeerId;
}

/**
 * Waits for the TLS handshake and checks the peer's certificate (the libp2p TLS spec): its
 * extension's key signed the certificate's key, and, when dialing a /p2p/ address, it is that peer.
 * TLS 1.3 only (the secure context's range) and ALPN "libp2p", as /tls/1.0.0 sends without an early muxer.
 */
async function handshake(socket: tls.TLSSocket, side: 'client' | 'server', expected: PeerId | undefined, signal: AbortSignal): Promise<Secured> {
  try {
    await secured(socket, side, signal);
    if (socket.alpnProtocol !== TLS_TCP_ALPN) throw new InvalidCryptoExchangeError(`the peer chose ALPN ${JSON.stringify(socket.alpnProtocol)}, not "${TLS_TCP_ALPN}"`);
    const cert = socket.getPeerCertificate();
    // an empty object when the peer sent none (a client not asked for one never is: the listener requests it)
    if (cert.raw === undefined) throw new InvalidCryptoExchangeError('the peer sent no certificate');
    const remotePeer = await verifyPeerCertificate(new Uint8Array(cert.raw));
    if (expected !== undefined && !expected.equals(remotePeer)) throw new UnexpectedPeerError(`the peer is ${remotePeer.toString()}, not ${expected.toString()} as dialed`);
    return { socket, remotePeer };
  } catch (err) {
    socket.destroy();
    if (signal.aborted) throw new TimeoutError(`handshake not completed: ${(signal.reason as Error).message}`);
    throw err;
  }
}

/** Resolves when the handshake completes; rejects when the socket fails or closes first, or on `signal`. */
async function secured(socket: tls.TLSSocket, side: 'client' | 'server', signal: AbortSignal): Promise<void> {
  const settled = new AbortController();
  const until = AbortSignal.any([signal, settled.signal]);
  try {
    await Promise.race([
      // a client's socket says 'secureConnect', a server's only 'secure'
      once(socket, side === 'client' ? 'secureConnect' : 'secure', { signal: until }),
      // a socket closed without an error ('end' from the peer) would otherwise leave the wait to the deadline
      once(socket, 'close', { signal: until }).then(() => {
        throw new Error('the peer closed the connection during the handshake');
      }),
    ]);
  } finally {
    settled.abort();
  }
}

/**
 * Why a handshake failed, in one line (OpenSSL's own message spans lines and names its source
 * file), with a hint where the peer answered with something else than TLS: an older Cohort
 * speaking multistream-select over plain TCP.
 */
function handshakeError(err: unknown): string {
  const { code = '', reason, message } = err as { code?: string; reason?: string; message: string };
  const suspect = ['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ECONNRESET'].includes(code) || /before secure TLS connection was established/.test(message);
  return (reason ?? message).trim() + (suspect ? ' (is the peer an older Cohort, before direct connections used TLS on the socket? Both ends need the same version)' : '');
}

/** A TLS socket as libp2p's MultiaddrConnection (plaintext in and out; the socket encrypts). */
class TlsSocketConnection extends AbstractMultiaddrConnection {
  constructor(
    private readonly socket: tls.TLSSocket,
    init: { remoteAddr: Multiaddr; direction: 'inbound' | 'outbound'; log: Logger; localAddr?: Multiaddr },
  ) {
    super({ ...init, inactivityTimeout: TCP_INACTIVITY_TIMEOUT_MS });
    socket.on('data', (buf: Buffer) => this.onData(buf));
    socket.on('error', (err: Error) => this.abort(err));
    // libp2p's TCP transport does the same: a connection silent for this long is dead (yamux and the
    // connection monitor's pings keep a live one busy)
    socket.setTimeout(TCP_INACTIVITY_TIMEOUT_MS);
    socket.once('timeout', () => this.abort(new TimeoutError(`no traffic from ${init.remoteAddr.toString()} for ${TCP_INACTIVITY_TIMEOUT_MS} ms`)));
    socket.once('end', () => this.onTransportClosed());
    socket.once('close', (hadError) => (hadError ? this.abort(new Error(`TLS connection to ${init.remoteAddr.toString()} closed on a transmission error`)) : this.onTransportClosed()));
    socket.on('drain', () => this.safeDispatchEvent('drain'));
  }

  sendData(data: Parameters<AbstractMultiaddrConnection['sendData']>[0]): { sentBytes: number; canSendMore: boolean } {
    let sentBytes = 0;
    let canSendMore = true;
    for (const buf of data) {
      sentBytes += buf.byteLength;
      canSendMore = this.socket.write(buf);
      if (!canSendMore) break;
    }
    return { sentBytes, canSendMore };
  }

  async sendClose(options?: AbortOptions): Promise<void> {
    if (this.socket.destroyed) return;
    const closed = once(this.socket, 'close', options);
    // sends TLS close_notify and FIN once everything written is flushed
    this.socket.destroySoon();
    await closed;
  }

  sendReset(): void {
    // a TLSSocket's handle is a TLSWrap, which has no TCP reset (resetAndDestroy throws)
    destroyDrained(this.socket);
  }

  sendPause(): void {
    this.socket.pause();
  }

  sendResume(): void {
    this.socket.resume();
  }
}

/** How long a reset connection may take to flush what it has written before it is destroyed anyway. */
const DRAIN_BEFORE_DESTROY_MS = 2000;

/**
 * Tears a TLS socket down without freeing its SSL object under a write in flight or inside its read
 * loop. Destroying at once crashed 8-peer all-reduces (SIGSEGV: OpenSSL's SSL_read on freed memory
 * from TLSWrap::ClearOut, the shape of nodejs/node#62967, where TLSWrap::Destroy frees the SSL while a
 * write is pending). So: stop reading, end the socket (close_notify and FIN once the queued writes are
 * flushed), and destroy it on the turn after it finished or closed; a peer that never lets the
 * writes drain gets the socket destroyed after DRAIN_BEFORE_DESTROY_MS, still never from within a
 * TLSWrap callback.
 */
function destroyDrained(socket: tls.TLSSocket): void {
  if (socket.destroyed) return;
  let done = false;
  const destroy = (): void => {
    if (done) return;
    done = true;
    clearTimeout(fallback);
    setImmediate(() => socket.destroy());
  };
  const fallback = setTimeout(destroy, DRAIN_BEFORE_DESTROY_MS);
  fallback.unref();
  socket.once('finish', destroy);
  socket.once('close', destroy);
  socket.pause();
  socket.end();
}

class TlsTcpListener extends TypedEventEmitter<ListenerEvents> implements Listener {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  readonly #shutdown = new AbortController();
  #listeningAddr: Multiaddr | undefined;
  /** Ready before the server listens: a socket is wrapped at once, before a byte of its ClientHello is read. */
  #context: tls.SecureContext | undefined;

  constructor(
    private readonly upgrader: Upgrader,
    private readonly credentials: TlsCredentials,
    private readonly log: Logger,
    private readonly init: TlsTcpInit,
  ) {
    super();
    this.#server = net.createServer({ noDelay: true, keepAlive: true }, (socket) => void this.onSocket(socket));
    this.#server.on('error', (err) => this.safeDispatchEvent('error', { detail: err }));
    this.#server.on('close', () => this.safeDispatchEvent('close'));
  }

  private async onSocket(raw: net.Socket): Promise<void> {
    this.#sockets.add(raw);
    raw.once('close', () => this.#sockets.delete(raw));
    const remote = raw.remoteAddress === undefined || raw.remotePort === undefined ? undefined : ipPortToMultiaddr(raw.remoteAddress, raw.remotePort);
    if (remote === undefined) {
      raw.destroy(); // gone before we looked
      return;
    }
    let maConn: TlsSocketConnection | undefined;
    try {
      const signal = AbortSignal.any([this.#shutdown.signal, AbortSignal.timeout(TLS_HANDSHAKE_TIMEOUT_MS)]);
      const socket = new tls.TLSSocket(raw, { isServer: true, secureContext: this.#context, requestCert: true, rejectUnauthorized: false, ALPNProtocols: [TLS_TCP_ALPN] });
      // the next socket gets the renewed certificate once the credentials made one (the old one is still valid for a while)
      void this.credentials.context('server').then((context) => (this.#context = context), () => undefined);
      const { remotePeer } = await handshake(socket, 'server', undefined, signal);
      maConn = new TlsSocketConnection(socket, { remoteAddr: remote, direction: 'inbound', log: this.log.newScope('connection'), ...(this.#listeningAddr ? { localAddr: this.#listeningAddr } : {}) });
      await this.upgrader.upgradeInbound(maConn, { signal: this.#shutdown.signal, skipEncryption: true, remotePeer });
    } catch (err) {
      raw.destroy();
      maConn?.abort(err as Error);
      const error = maConn === undefined ? new Error(`TLS handshake failed: ${handshakeError(err)}`, { cause: err }) : (err as Error);
      this.log.error('inbound connection from %a failed - %e', remote, error);
      this.init.onInboundError?.(remote.toString(), error);
    }
  }

  async listen(ma: Multiaddr): Promise<void> {
    const config = getNetConfig(ma);
    this.#context = await this.credentials.context('server');
    this.#listeningAddr = ma;
    this.#server.listen({ host: config.host, port: config.port ?? 0, ipv6Only: config.type === 'ip6' });
    await once(this.#server, 'listening');
    this.safeDispatchEvent('listening');
  }

  getAddrs(): Multiaddr[] {
    const address = this.#server.address();
    if (address === null || typeof address === 'string' || this.#listeningAddr === undefined) return [];
    return getThinWaistAddresses(this.#listeningAddr, address.port);
  }

  updateAnnounceAddrs(): void {}

  async close(): Promise<void> {
    this.#shutdown.abort();
    const closed = this.#server.listening ? once(this.#server, 'close') : Promise.resolve();
    this.#server.close();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }
}
