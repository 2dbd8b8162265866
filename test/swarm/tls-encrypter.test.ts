import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { test, type TestContext } from 'node:test';
import { yamux } from '@chainsafe/libp2p-yamux';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { UnexpectedPeerError } from '@libp2p/interface';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { ping, type Ping } from '@libp2p/ping';
import { tcp } from '@libp2p/tcp';
import { tls as libp2pTls } from '@libp2p/tls';
import { generateCertificate, verifyPeerCertificate } from '@libp2p/tls/utils';
import { multiaddr } from '@multiformats/multiaddr';
import { createLibp2p, type Libp2p } from 'libp2p';
import { TLS_CERT_RENEW_BEFORE_MS } from '../../src/swarm/constants.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { TlsCredentials } from '../../src/swarm/tls-credentials.js';
import { startNode } from '../helpers/swarm.js';

/** multistream-select's messages as @libp2p/tcp's upgrader sends them before `/tls/1.0.0`: a varint length (one byte here), the protocol, '\n'. */
const SELECT_TLS = ['/multistream/1.0.0', '/tls/1.0.0'].map((p) => String.fromCharCode(p.length + 1) + p + '\n').join('');

async function readExactly(socket: net.Socket, bytes: number): Promise<string> {
  for (;;) {
    const chunk = socket.read(bytes) as Buffer | null;
    if (chunk !== null) return chunk.toString('latin1');
    await Promise.race([once(socket, 'readable'), once(socket, 'close').then(() => Promise.reject(new Error('closed during multistream-select')))]);
  }
}

/** A TLS endpoint outside libp2p holding the libp2p certificate of a fresh identity, as a peer would. */
async function libp2pCredentials(): Promise<{ id: string; cert: string; key: string }> {
  const key = await generateKeyPair('Ed25519');
  return { id: peerIdFromPrivateKey(key).toString(), ...(await generateCertificate(key)) };
}

/** The certificate `node` presents when dialed: multistream-select of /tls/1.0.0 by hand, then TLS. */
async function certificateAsListener(t: TestContext, node: SwarmNode): Promise<Buffer> {
  const port = Number(multiaddr(node.multiaddrs()[0]).getComponents().find((c) => c.name === 'tcp')!.value);
  const raw = net.connect(port, '127.0.0.1');
  t.after(() => raw.destroy());
  await once(raw, 'connect');
  raw.write(SELECT_TLS);
  assert.equal(await readExactly(raw, SELECT_TLS.length), SELECT_TLS, 'the node answers /tls/1.0.0');
  const client = await libp2pCredentials();
  const socket = tls.connect({ socket: raw, cert: client.cert, key: client.key, rejectUnauthorized: false, ALPNProtocols: ['libp2p'] });
  socket.on('error', () => {}); // the node closes the connection once the test stops talking
  await once(socket, 'secureConnect');
  assert.equal(socket.getProtocol(), 'TLSv1.3');
  const cert = socket.getPeerCertificate().raw;
  socket.destroy();
  return cert;
}

/** The certificate `node` presents when it dials: a listener that answers multistream-select, then TLS. */
async function certificateAsDialer(t: TestContext, node: SwarmNode): Promise<Buffer> {
  const server = await libp2pCredentials();
  const listener = net.createServer();
  t.after(() => listener.close());
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const accepted = once(listener, 'connection') as Promise<[net.Socket]>;
  const dial = node.libp2p.dial(multiaddr(`/ip4/127.0.0.1/tcp/${(listener.address() as net.AddressInfo).port}/p2p/${server.id}`), { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  const [raw] = await accepted;
  t.after(() => raw.destroy());
  assert.equal(await readExactly(raw, SELECT_TLS.length), SELECT_TLS, 'the node proposes /tls/1.0.0');
  raw.write(SELECT_TLS);
  const socket = new tls.TLSSocket(raw, { isServer: true, cert: server.cert, key: server.key, requestCert: true, rejectUnauthorized: false });
  socket.on('error', () => {});
  await once(socket, 'secure');
  const cert = socket.getPeerCertificate().raw;
  socket.destroy();
  await dial;
  return cert;
}

test('a node presents one certificate, binding its peer id, on every connection it accepts or dials', async (t) => {
  const node = await startNode(t, { runId: 'tls-one-cert' });
  const certs = [await certificateAsListener(t, node), await certificateAsListener(t, node), await certificateAsDialer(t, node), await certificateAsDialer(t, node)];
  for (const cert of certs.slice(1)) assert.deepEqual(cert, certs[0]);
  assert.equal((await verifyPeerCertificate(new Uint8Array(certs[0]!))).toString(), node.peerId.toString());
});

test('a dial to an address with another /p2p/ id fails: the certificate proves whose it is', async (t) => {
  const a = await startNode(t, { runId: 'tls-wrong-id' });
  const b = await startNode(t, { runId: 'tls-wrong-id' });
  const c = await startNode(t, { runId: 'tls-wrong-id' });
  // a's address, c's id: someone else answers there
  const forged = `${a.multiaddrs()[0]!.split('/p2p/')[0]!}/p2p/${c.peerId.toString()}`;
  // the upgrader reports the encrypter's UnexpectedPeerError as an EncryptionFailedError of its message
  await assert.rejects(b.libp2p.dial(multiaddr(forged)), (err: Error) => err.name === 'EncryptionFailedError' && err.message === new UnexpectedPeerError().message);
  assert.equal(b.libp2p.getConnections().length, 0);
  // and the genuine address still connects, as /tls/1.0.0
  const conn = await b.libp2p.dial(a.libp2p.getMultiaddrs()[0]!);
  assert.equal(conn.remotePeer.toString(), a.peerId.toString());
  assert.equal(conn.encryption, '/tls/1.0.0');
});

/** A libp2p node of stock parts: @libp2p/tcp, @libp2p/tls (a certificate per connection), yamux, ping. */
async function stockNode(t: TestContext): Promise<Libp2p<{ ping: Ping }>> {
  const node = await createLibp2p({
    addresses: { listen: ['/ip4/127.0.0.1/tcp/0'] },
    transports: [tcp()],
    connectionEncrypters: [libp2pTls()],
    streamMuxers: [yamux()],
    services: { ping: ping() },
  });
  t.after(() => node.stop());
  return node;
}

test('the wire is unchanged: @libp2p/tls peers connect to a node and a node to them, muxer chosen in the handshake', async (t) => {
  const node = await startNode(t, { runId: 'tls-interop' });
  const [dialer, listener] = [await stockNode(t), await stockNode(t)];
  const outbound = await dialer.dial(multiaddr(node.multiaddrs()[0]));
  assert.equal(outbound.encryption, '/tls/1.0.0');
  assert.equal(outbound.multiplexer, '/yamux/1.0.0');
  assert.ok((await dialer.services.ping.ping(node.peerId)) >= 0);
  const inbound = await node.libp2p.dial(listener.getMultiaddrs()[0]!);
  assert.equal(inbound.encryption, '/tls/1.0.0');
  assert.equal(inbound.multiplexer, '/yamux/1.0.0');
  assert.equal(inbound.remotePeer.toString(), listener.peerId.toString());
  assert.ok((await (node.libp2p.services as { ping: Ping }).ping.ping(listener.peerId)) >= 0);
});

test('credentials make the certificate once and again only when it nears the end of its validity', async () => {
  let now = Date.now();
  const credentials = new TlsCredentials(await generateKeyPair('Ed25519'), () => now);
  const first = await credentials.identity();
  const context = await credentials.context('server');
  assert.equal(await credentials.identity(), first);
  assert.equal(await credentials.context('server'), context);
  assert.notEqual(await credentials.context('client'), context, 'dialing and listening use separate contexts');
  assert.ok(first.validTo > now + 50 * 365 * 24 * 3600_000, `valid for decades, as libp2p makes it (until ${new Date(first.validTo).toISOString()})`);
  now = first.validTo - TLS_CERT_RENEW_BEFORE_MS + 1;
  const renewed = await credentials.identity();
  assert.notEqual(renewed.cert, first.cert);
  assert.notEqual(await credentials.context('server'), context);
  assert.equal((await verifyPeerCertificate(new Uint8Array(new crypto.X509Certificate(renewed.cert).raw))).toString(), (await verifyPeerCertificate(new Uint8Array(new crypto.X509Certificate(first.cert).raw))).toString(), 'the same peer id');
});
