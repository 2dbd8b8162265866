import { X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import type { PrivateKey } from '@libp2p/interface';
import { generateCertificate } from '@libp2p/tls/utils';
import { TLS_CERT_RENEW_BEFORE_MS } from './constants.js';

export interface TlsIdentity {
  /** PEM of the libp2p TLS spec's self-signed certificate (its extension binds the node's libp2p key). */
  readonly cert: string;
  readonly key: string;
  /** When the certificate stops being valid (ms since the epoch). */
  readonly validTo: number;
}

/**
 * A node's TLS certificate, made once and presented on every connection (go-libp2p does the same),
 * instead of @libp2p/tls's fresh key pair, signature and X.509 encoding per connection: a joiner
 * connects to every node of a small swarm, and those handshakes were most of the CPU of a 50-peer
 * DHT starting up. It is made again once it nears the end of its validity (100 years as made today).
 *
 * Two secure contexts: one for dialing, one for listening. Node installs a server's session
 * callbacks on the context's SSL_CTX, and a client connection sharing it crashed the process
 * (SIGSEGV in SSL_read of a TLS 1.3 session ticket; bench allreduce with 8 peers, Node 20).
 */
export class TlsCredentials {
  #identity: Promise<TlsIdentity> | undefined;
  /** the current certificate's end of validity; 0 while it is being made */
  #validTo = 0;
  #contexts = new Map<'client' | 'server', Promise<tls.SecureContext>>();

  constructor(
    private readonly privateKey: PrivateKey,
    /** the clock, for tests of the renewal */
    private readonly now: () => number = Date.now,
  ) {}

  /** The certificate, made on first use and again once it has less than TLS_CERT_RENEW_BEFORE_MS to live. */
  identity(): Promise<TlsIdentity> {
    if (this.#identity === undefined || (this.#validTo > 0 && this.#validTo - this.now() < TLS_CERT_RENEW_BEFORE_MS)) {
      const made = this.#generate();
      this.#identity = made;
      this.#validTo = 0;
      this.#contexts = new Map();
      made.then(
        (identity) => (this.#validTo = identity.validTo),
        // the next connection tries again (its own handshake fails with this error)
        () => {
          if (this.#identity === made) this.#identity = undefined;
        },
      );
    }
    return this.#identity;
  }

  /** TLS 1.3 only, as the libp2p TLS spec requires. */
  context(side: 'client' | 'server'): Promise<tls.SecureContext> {
    const identity = this.identity();
    let context = this.#contexts.get(side);
    if (context === undefined) {
      context = identity.then(({ cert, key }) => tls.createSecureContext({ cert, key, minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' }));
      this.#contexts.set(side, context);
    }
    return context;
  }

  async #generate(): Promise<TlsIdentity> {
    const { cert, key } = await generateCertificate(this.privateKey);
    return { cert, key, validTo: Date.parse(new X509Certificate(cert).validTo) };
  }
}
