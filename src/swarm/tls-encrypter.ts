import { TLSSocket, connect } from 'node:tls';
import { InvalidCryptoExchangeError, serviceCapabilities } from '@libp2p/interface';
import type { ComponentLogger, ConnectionEncrypter, Logger, MessageStream, PeerId, SecureConnectionOptions, SecuredConnection, StreamMuxerFactory, Upgrader } from '@libp2p/interface';
import { toMessageStream, toNodeDuplex, verifyPeerCertificate } from '@libp2p/tls/utils';
import type { TlsCredentials } from './tls-credentials.js';

/** The libp2p TLS spec's protocol id, as @libp2p/tls negotiates it. */
const LIBP2P_TLS_PROTOCOL = '/tls/1.0.0';

interface TlsEncrypterComponents {
  readonly logger: ComponentLogger;
  readonly upgrader: Upgrader;
}

/**
 * libp2p's `/tls/1.0.0` (@libp2p/tls's handshake, byte for byte: TLS 1.3, the muxer offered in ALPN,
 * each side verifying the other's certificate binds its peer id), presenting the node's one
 * certificate (`credentials`) where @libp2p/tls makes a new one for every connection.
 */
export function tlsEncrypter(credentials: TlsCredentials): (components: TlsEncrypterComponents) => ConnectionEncrypter {
  return (components) => new TlsEncrypter(components, credentials);
}

class TlsEncrypter implements ConnectionEncrypter {
  readonly protocol = LIBP2P_TLS_PROTOCOL;
  readonly [Symbol.toStringTag] = 'cohort/tls';
  readonly [serviceCapabilities] = ['@libp2p/connection-encryption'];
  readonly #log: Logger;

  constructor(
    private readonly components: TlsEncrypterComponents,
    private readonly credentials: TlsCredentials,
  ) {
    this.#log = components.logger.forComponent('cohort:tls');
  }

  secureInbound(connection: MessageStream, options?: SecureConnectionOptions): Promise<SecuredConnection> {
    return this.#encrypt(connection, true, options);
  }

  secureOutbound(connection: MessageStream, options?: SecureConnectionOptions): Promise<SecuredConnection> {
    return this.#encrypt(connection, false, options);
  }

  async #encrypt(connection: MessageStream, isServer: boolean, options?: SecureConnectionOptions): Promise<SecuredConnection> {
    const log = connection.log?.newScope('tls') ?? this.#log;
    const muxers = this.components.upgrader.getStreamMuxers();
    const offered = options?.skipStreamMuxerNegotiation === true ? [] : [...muxers.keys()];
    const secureContext = await this.credentials.context(isServer ? 'server' : 'client');
    options?.signal?.throwIfAborted();
    let streamMuxer: StreamMuxerFactory | undefined;
    const duplex = toNodeDuplex(connection);
    const socket = isServer
      ? new TLSSocket(duplex, {
          isServer: true,
          secureContext,
          // self-signed certificates, checked below; clients must send one
          requestCert: true,
          rejectUnauthorized: false,
          // early muxer negotiation: the first muxer of the client's list we have, else 'libp2p' (negotiated afterwards)
          ALPNCallback: ({ protocols }) => {
            const chosen = protocols.find((p) => muxers.has(p)) ?? (protocols.includes('libp2p') ? 'libp2p' : undefined);
            if (chosen !== undefined) streamMuxer = muxers.get(chosen);
            return chosen;
          },
        })
      : connect({ socket: duplex, secureContext, rejectUnauthorized: false, ALPNProtocols: [...offered, 'libp2p'] });
    duplex.on('error', (err: Error) => socket.emit('error', err));
    const onAbort = (): void => void socket.emit('error', new InvalidCryptoExchangeError(`TLS handshake not completed: ${String(options?.signal?.reason)}`));
    options?.signal?.addEventListener('abort', onAbort);
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('secure', () => resolve());
        socket.on('error', (err: Error) => {
          log.error('error encrypting %s connection - %e', connection.direction, err);
          socket.destroy();
          connection.abort(err);
          reject(err);
        });
      });
      const remotePeer = await verify(socket, options?.remotePeer, log).catch((err: unknown) => {
        socket.destroy();
        connection.abort(err as Error);
        throw err;
      });
      // a server that answered 'libp2p' (or nothing) has no early muxer: the upgrader negotiates one
      if (!isServer && options?.skipStreamMuxerNegotiation !== true && typeof socket.alpnProtocol === 'string' && socket.alpnProtocol !== 'libp2p') {
        streamMuxer = muxers.get(socket.alpnProtocol);
        if (streamMuxer === undefined) {
          const err = new InvalidCryptoExchangeError(`the peer chose muxer ${socket.alpnProtocol}, which this node does not have`);
          connection.abort(err);
          throw err;
        }
      }
      return { remotePeer, connection: toMessageStream(connection, socket), ...(streamMuxer ? { streamMuxer } : {}) };
    } finally {
      options?.signal?.removeEventListener('abort', onAbort);
    }
  }
}

/** The peer's certificate binds its peer id (and is `expected`, when the dialer knows whom it dialed). */
async function verify(socket: TLSSocket, expected: PeerId | undefined, log: Logger): Promise<PeerId> {
  // an empty object when the peer sent none
  const { raw } = socket.getPeerCertificate();
  if (raw === undefined) throw new InvalidCryptoExchangeError('the peer sent no certificate');
  return verifyPeerCertificate(raw, expected, log);
}
