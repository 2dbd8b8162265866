// A hostile identity against DHT holders (issue 23, attack 3), with real swarm nodes on loopback: the
// attacker sends signed entries straight to a holder over the records protocol. Every node is public from
// the start: a reachability re-check under load would make a holder drop what it holds mid-test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { decode as cborDecode, encode as cborEncode } from 'cborg';
import { z } from 'zod';
import { signEntry, type WireEntry } from '../../src/swarm/records/entry.js';
import { rawRequest, startSwarm } from '../helpers/swarm.js';

const store = (entries: WireEntry[]): Uint8Array => cborEncode({ t: 'store', e: entries });

test('one identity cannot fill a holder: past its quota it is refused, and other peers still store new keys', { timeout: 60_000 }, async (t) => {
  const [holder, honest, attacker] = await startSwarm(t, 3, { runId: 'dht-quota', reachability: 'public' });
  const key = await generateKeyPair('Ed25519');
  const expires = Date.now() + 5 * 60_000;
  const big = cborEncode({ pad: 'x'.repeat(200 * 1024) });
  let stored = 0;
  let refusal: string | null = null;
  // today's limit: 64 MiB, 328 of these; a few more requests are the bound of this loop
  for (let i = 0; i < 340 && refusal === null; i++) {
    const answer = (await rawRequest(attacker!, holder!, store([await signEntry(key, 'dht-quota', `state/junk${i}`, '', big, expires)]))) as { r: Array<string | null> };
    refusal = answer.r[0] ?? null;
    if (refusal === null) stored++;
  }
  assert.equal(refusal, 'owner-full');
  assert.equal(stored, 1, 'one 200 KiB entry fits its 256 KiB quota');
  // namespaces the protocol does not have, and lifetimes longer than the namespace's use, are refused
  assert.deepEqual(await rawRequest(attacker!, holder!, store([await signEntry(key, 'dht-quota', 'junk/1', '', cborEncode(1), expires)])), { t: 'stored', r: ['unknown-namespace'] });
  assert.deepEqual(await rawRequest(attacker!, holder!, store([await signEntry(key, 'dht-quota', 'state/x', '', cborEncode(1), Date.now() + 24 * 3_600_000)])), { t: 'stored', r: ['ttl-too-long'] });

  // the keys the attack made the holder refuse (store-full) are stored on it
  for (const ns of ['averaging', 'state']) {
    const records = honest!.registerNamespace(ns, z.record(z.string(), z.number()));
    const result = await records.store(ns === 'state' ? 'state/state' : 'averaging/grad:42', '', { epoch: 1 }, Date.now() + 30_000);
    assert.deepEqual(result.refused.filter((r) => r.peer === holder!.peerId.toString()), [], `${ns}: ${JSON.stringify(result.refused)}`);
  }
  assert.equal(holder!.stats().records.rejected['owner-full'], 1);
});

test("an honest entry stays in a holder's answer under a flood of entries from 550 identities", { timeout: 240_000 }, async (t) => {
  const [holder, honest, attacker] = await startSwarm(t, 3, { runId: 'dht-flood', reachability: 'public' });
  // signing and checking 8,800 entries takes a minute on a loaded machine: they must outlive that
  const expires = Date.now() + 30 * 60_000;
  const honestKey = await generateKeyPair('Ed25519');
  const mine = await signEntry(honestKey, 'dht-flood', 'progress', '', cborEncode({ samples: 7, epoch: 2 }), expires);
  assert.deepEqual(await rawRequest(honest!, holder!, store([mine])), { t: 'stored', r: [null] });
  // 8,800 tiny entries: within the 1 MiB a key may hold, but over 1 MiB + 64 KiB once encoded, the reader's cap
  const keys = await Promise.all(Array.from({ length: 550 }, () => generateKeyPair('Ed25519')));
  const flood: WireEntry[] = [];
  for (const key of keys) for (let s = 0; s < 16; s++) flood.push(await signEntry(key, 'dht-flood', 'progress', `s${s}`, cborEncode(0), expires));
  for (let i = 0; i < flood.length; i += 64) await rawRequest(attacker!, holder!, store(flood.slice(i, i + 64)));
  assert.ok(holder!.stats().records.entries > 5000, `the holder took the flood (${holder!.stats().records.entries} entries)`);

  const answer = (await rawRequest(honest!, holder!, cborEncode({ t: 'get', k: 'progress' }))) as { t: string; e: WireEntry[] };
  assert.equal(answer.t, 'found');
  const found = answer.e.find((e) => e.s === '' && (cborDecode(e.v) as { samples?: number }).samples === 7);
  assert.ok(found, `the honest entry is among the ${answer.e.length} answered`);
});
