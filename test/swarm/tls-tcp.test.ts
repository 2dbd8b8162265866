import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import tls from 'node:tls';
import { test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { generateCertificate, verifyPeerCertificate } from '@libp2p/tls/utils';
import { multiaddr } from '@multiformats/multiaddr';
import { pino } from 'pino';
import { readToEnd, type SwarmNode } from '../../src/swarm/index.js';
import { startNode, waitFor } from '../helpers/swarm.js';

/** `peer` answers `tag` on `echo/1.0.0`: what it read, prefixed with its tag. */
async function serveEcho(peer: SwarmNode, tag: string): Promise<void> {
  await peer.handle('echo/1.0.0', async (stream) => {
    const got = new TextDecoder().decode(await readToEnd(stream, { maxBytes: 1024 }));
    stream.send(new TextEncoder().encode(`${tag}:${got}`));
    await stream.close();
  });
}

async function echo(from: SwarmNode, to: SwarmNode, text: string): Promise<string> {
  const stream = await from.dial(to.peerId, 'echo/1.0.0');
  stream.send(new TextEncoder().encode(text));
  await stream.close();
  return new TextDecoder().decode(await readToEnd(stream, { maxBytes: 1024 }));
}

/** A TLS endpoint outside libp2p holding the libp2p certificate of a fresh identity, as a peer would. */
async function libp2pCredentials(): Promise<{ id: string; cert: string; key: string }> {
  const key = await generateKeyPair('Ed25519');
  return { id: peerIdFromPrivateKey(key).toString(), ...(await generateCertificate(key)) };
}

function port(node: SwarmNode): number {
  return Number(multiaddr(node.multiaddrs()[0]).getComponents().find((c) => c.name === 'tcp')!.value);
}

test('direct connections: TLS on the socket, streams both ways, the remote peer authenticated', async (t) => {
  const a = await startNode(t, { runId: 'tls-tcp', encryption: 'native-tls' });
  const b = await startNode(t, { runId: 'tls-tcp', encryption: 'native-tls', initialPeers: a.multiaddrs() });
  assert.equal((await b.ready).connected.length, 1);
  await serveEcho(a, 'a');
  await serveEcho(b, 'b');
  assert.equal(await echo(b, a, 'from b'), 'a:from b');
  assert.equal(await echo(a, b, 'from a'), 'b:from a');
  const [conn] = a.libp2p.getConnections(b.peerId);
  // the upgrader's name for a connection whose transport encrypted it (no /tls/1.0.0 or /noise negotiated)
  assert.equal(conn?.encryption, 'native');
  assert.equal(conn?.multiplexer, '/yamux/1.0.0');
  assert.equal(b.libp2p.getConnections(a.peerId)[0]?.encryption, 'native');
});

test('a dial to an address with the wrong /p2p/ id fails, naming both peers', async (t) => {
  const a = await startNode(t, { runId: 'tls-tcp-wrong', encryption: 'native-tls' });
  const b = await startNode(t, { runId: 'tls-tcp-wrong', encryption: 'native-tls' });
  const c = await startNode(t, { runId: 'tls-tcp-wrong', encryption: 'native-tls' });
  // a's address, c's id: someone else answers there
  const forged = `${a.multiaddrs()[0]!.split('/p2p/')[0]!}/p2p/${c.peerId.toString()}`;
  await assert.rejects(b.libp2p.dial(multiaddr(forged)), (err: Error) => {
    assert.match(err.message, new RegExp(`TLS handshake with ${forged} failed: the peer is ${a.peerId.toString()}, not ${c.peerId.toString()} as dialed`));
    return true;
  });
  assert.equal(b.libp2p.getConnections().length, 0);
});

test('the wire is TLS 1.3 with the libp2p certificate, both as listener and as dialer', async (t) => {
  const node = await startNode(t, { runId: 'tls-tcp-wire', encryption: 'native-tls' });
  const client = await libp2pCredentials();
  // as listener: a plain TLS client sees TLS 1.3, AES-GCM, ALPN libp2p and the node's own certificate
  const socket = tls.connect({ host: '127.0.0.1', port: port(node), cert: client.cert, key: client.key, rejectUnauthorized: false, ALPNProtocols: ['libp2p'] });
  t.after(() => socket.destroy());
  await once(socket, 'secureConnect');
  assert.equal(socket.getProtocol(), 'TLSv1.3');
  assert.match(socket.getCipher().name, /^TLS_AES_(128|256)_GCM_SHA(256|384)$/);
  assert.equal(socket.alpnProtocol, 'libp2p');
  assert.equal((await verifyPeerCertificate(new Uint8Array(socket.getPeerCertificate().raw))).toString(), node.peerId.toString());
  // a client without a certificate completes its side of TLS 1.3, then the listener closes the connection
  const anonymous = tls.connect({ host: '127.0.0.1', port: port(node), rejectUnauthorized: false, ALPNProtocols: ['libp2p'] });
  t.after(() => anonymous.destroy());
  anonymous.on('error', () => {});
  await once(anonymous, 'close');
  assert.equal(node.libp2p.getConnections().length, 0);

  // as dialer: a TLS server the node dials sees TLS 1.3 and a client certificate of the node's key
  const server = await libp2pCredentials();
  const accepted = new Promise<tls.TLSSocket>((resolve) => {
    const listener = tls.createServer({ cert: server.cert, key: server.key, requestCert: true, rejectUnauthorized: false, ALPNProtocols: ['libp2p'] }, resolve);
    listener.listen(0, '127.0.0.1', () => void node.libp2p.dial(multiaddr(`/ip4/127.0.0.1/tcp/${(listener.address() as net.AddressInfo).port}/p2p/${server.id}`), { signal: AbortSignal.timeout(2000) }).catch(() => {}));
    t.after(() => listener.close());
  });
  const inbound = await accepted;
  t.after(() => inbound.destroy());
  assert.equal(inbound.getProtocol(), 'TLSv1.3');
  assert.equal((await verifyPeerCertificate(new Uint8Array(inbound.getPeerCertificate().raw))).toString(), node.peerId.toString());
});

test('a peer speaking plain TCP (an older version) is refused with a clear error both ways', async (t) => {
  const logs = new PassThrough();
  let logged = '';
  logs.on('data', (d: Buffer) => (logged += d.toString()));
  const node = await startNode(t, { runId: 'tls-tcp-old', encryption: 'native-tls', log: pino({ level: 'info' }, logs) });
  // inbound: multistream-select's first message where a ClientHello belongs
  const plain = net.connect(port(node), '127.0.0.1');
  t.after(() => plain.destroy());
  await once(plain, 'connect');
  plain.write('\x13/multistream/1.0.0\n');
  await waitFor('the refusal in the log', () => logged.includes('inbound connection from /ip4/127.0.0.1/tcp/'));
  assert.match(logged, /refused: TLS handshake failed: .*older Cohort/);

  // outbound: a listener that answers multistream-select instead of TLS
  const old = net.createServer((s) => s.end('\x13/multistream/1.0.0\n'));
  await new Promise<void>((resolve) => old.listen(0, '127.0.0.1', resolve));
  t.after(() => old.close());
  const someone = await libp2pCredentials();
  await assert.rejects(node.libp2p.dial(multiaddr(`/ip4/127.0.0.1/tcp/${(old.address() as net.AddressInfo).port}/p2p/${someone.id}`)), (err: Error) => {
    assert.match(err.message, /TLS handshake with \/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/\w+ failed: .*older Cohort/);
    return true;
  });
});
