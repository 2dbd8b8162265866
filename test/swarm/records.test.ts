import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { encode as cborEncode } from 'cborg';
import { z } from 'zod';
import { CLOCK_SKEW_MS, RECORD_NAMESPACE_TTL_MS } from '../../src/swarm/constants.js';
import { admitEntry } from '../../src/swarm/records/admit.js';
import { signEntry, VerifiedSignatures, type VerifiedEntry } from '../../src/swarm/records/entry.js';
import { NamespaceRegistry } from '../../src/swarm/records/namespaces.js';
import { PeerRateLimiter } from '../../src/swarm/records/rate-limit.js';
import { RecordTable } from '../../src/swarm/records/table.js';

const RUN = 'unit-run';
const NOW = 1_700_000_000_000;
/** Shared by every admission here, as a node's is: an entry verified once must not vouch for a tampered copy. */
const signatures = new VerifiedSignatures();

function registry(): NamespaceRegistry {
  const r = new NamespaceRegistry();
  r.register('progress', z.strictObject({ samples: z.number().int() }), { maxValueBytes: 64 });
  return r;
}

async function admitted(raw: unknown, reg = registry(), now = NOW, requireNamespace = true): Promise<VerifiedEntry> {
  const a = await admitEntry(RUN, raw, reg, signatures, now, requireNamespace);
  assert.ok(a.ok, a.ok ? '' : `${a.reason}: ${a.detail}`);
  return a.entry;
}

async function reason(raw: unknown, requireNamespace = true): Promise<string> {
  const a = await admitEntry(RUN, raw, registry(), signatures, NOW, requireNamespace);
  assert.equal(a.ok, false, 'entry should have been refused');
  return a.ok ? '' : a.reason;
}

test('signed entries are admitted with their signer as owner; tampered, forged and foreign ones are not', async () => {
  const alice = await generateKeyPair('Ed25519');
  const mallory = await generateKeyPair('Ed25519');
  const value = cborEncode({ samples: 5 });
  const good = await signEntry(alice, RUN, 'progress', '', value, NOW + 1000);
  assert.equal((await admitted(good)).owner, peerIdFromPrivateKey(alice).toString());
  // Mallory signs an entry but claims Alice's key: the signature does not verify.
  const forged = { ...(await signEntry(mallory, RUN, 'progress', '', value, NOW + 1000)), p: good.p };
  assert.equal(await reason(forged), 'bad-signature');
  assert.equal(await reason({ ...good, v: cborEncode({ samples: 6 }) }), 'bad-signature');
  assert.equal(await reason({ ...good, e: good.e + 1 }), 'bad-signature');
  assert.equal(await reason({ ...good, g: new Uint8Array(0) }), 'bad-signature');
  assert.equal(await reason(await signEntry(alice, 'other-run', 'progress', '', value, NOW + 1000)), 'bad-signature');
});

test('verified signatures are remembered up to the capacity; a changed copy of a remembered entry is verified again and refused', async () => {
  const key = await generateKeyPair('Ed25519');
  const owner = peerIdFromPrivateKey(key).toString();
  const memory = new VerifiedSignatures(2);
  const [a, b, c] = await Promise.all([1, 2, 3].map((samples) => signEntry(key, RUN, 'progress', '', cborEncode({ samples }), NOW + 1000)));
  assert.equal((await memory.verify(RUN, a!))?.owner, owner);
  assert.equal((await memory.verify(RUN, a!))?.owner, owner, 'the same entry again');
  assert.equal(memory.size, 1, 'verified twice, remembered once');
  for (const changed of [{ ...a!, v: b!.v }, { ...a!, e: a!.e + 1 }, { ...a!, s: 'x' }, { ...a!, g: b!.g }]) assert.equal(await memory.verify(RUN, changed), null);
  assert.equal(await memory.verify('other-run', a!), null, 'the same bytes in another run');
  assert.equal(memory.size, 1, 'what did not verify is not remembered');
  for (const entry of [b!, c!]) assert.equal((await memory.verify(RUN, entry))?.owner, owner);
  assert.equal(memory.size, 2, 'bounded');
  assert.equal((await memory.verify(RUN, a!))?.owner, owner, 'an entry dropped from memory verifies again');
});

test('entries outside the limits, expired or off-schema are refused with their reason', async () => {
  const key = await generateKeyPair('Ed25519');
  const sign = (k: string, s: string, v: unknown, e: number): ReturnType<typeof signEntry> => signEntry(key, RUN, k, s, cborEncode(v), e);
  assert.equal(await reason({ k: 'progress' }), 'malformed');
  assert.equal(await reason('not even an object'), 'malformed');
  assert.equal(await reason(await sign('progress', '', { samples: 1 }, NOW - CLOCK_SKEW_MS - 1)), 'expired');
  // within the clock-skew tolerance: still accepted for storage
  await admitted(await sign('progress', '', { samples: 1 }, NOW - CLOCK_SKEW_MS + 100));
  assert.equal(await reason(await sign('progress', '', { samples: 1 }, NOW + RECORD_NAMESPACE_TTL_MS['progress']! + CLOCK_SKEW_MS + 1)), 'ttl-too-long');
  assert.equal(await reason(await sign('progress', '', { samples: 'many' }, NOW + 1000)), 'schema');
  assert.equal(await reason(await sign('progress', '', { samples: 1, pad: 'x'.repeat(100) }, NOW + 1000)), 'value-too-large');
  assert.equal(await reason(await sign('p'.repeat(300), '', {}, NOW + 1000)), 'key-too-long');
  assert.equal(await reason(await sign('progress', 's'.repeat(200), { samples: 1 }, NOW + 1000)), 'subkey-too-long');
  assert.equal(await reason(await sign('unknown/key', '', { any: 1 }, NOW + 1000)), 'unknown-namespace');
  // a peer holding records for others refuses namespaces the protocol does not have
  assert.equal(await reason(await sign('unknown/key', '', { any: 1 }, NOW + 1000), false), 'unknown-namespace');
  // and accepts those of the protocol it has no schema for (the reader checks them), within their lifetime
  await admitted(await sign('state/x', '', { any: 1 }, NOW + 1000), registry(), NOW, false);
  assert.equal(await reason(await sign('state/x', '', { any: 1 }, NOW + RECORD_NAMESPACE_TTL_MS['state']! + CLOCK_SKEW_MS + 1), false), 'ttl-too-long');
});

test('record table: later expiration wins per (owner, subkey); owners never overwrite each other', async () => {
  const [a, b] = [await generateKeyPair('Ed25519'), await generateKeyPair('Ed25519')];
  const entry = async (key: typeof a, s: string, samples: number, e: number): Promise<VerifiedEntry> => admitted(await signEntry(key, RUN, 'progress', s, cborEncode({ samples }), e));
  const table = new RecordTable();
  assert.equal(table.put(await entry(a, '', 1, NOW + 2000), NOW), 'stored');
  assert.equal(table.put(await entry(a, '', 2, NOW + 1000), NOW), 'not-newer');
  assert.equal(table.put(await entry(a, '', 3, NOW + 2000), NOW), 'not-newer');
  assert.equal(table.put(await entry(b, '', 9, NOW + 1500), NOW), 'stored');
  assert.equal(table.put(await entry(a, 'second', 4, NOW + 1500), NOW), 'stored');
  assert.equal(table.put(await entry(a, '', 5, NOW + 3000), NOW), 'stored');
  const held = table.get('progress', NOW);
  assert.equal(held.length, 3);
  assert.deepEqual(held.map((x) => x.wire.e).sort(), [NOW + 1500, NOW + 1500, NOW + 3000]);
  // expired entries are not returned, and eviction frees them
  assert.equal(table.get('progress', NOW + 2000).length, 1);
  assert.equal(table.evictExpired(NOW + 2000), 2);
  assert.deepEqual(table.stats().entries, 1);
  assert.equal(table.evictExpired(NOW + 5000), 1);
  assert.deepEqual(table.stats(), { keys: 0, entries: 0, bytes: 0 });
});

test('record table limits: subkeys per owner, bytes per key, bytes in all', async () => {
  const a = await generateKeyPair('Ed25519');
  const entry = async (s: string): Promise<VerifiedEntry> => admitted(await signEntry(a, RUN, 'progress', s, cborEncode({ samples: 1 }), NOW + 1000));
  const perOwner = new RecordTable({ keyBytes: 1 << 20, storeBytes: 1 << 20, subkeysPerOwner: 2 });
  assert.equal(perOwner.put(await entry('1'), NOW), 'stored');
  assert.equal(perOwner.put(await entry('2'), NOW), 'stored');
  assert.equal(perOwner.put(await entry('3'), NOW), 'key-full');
  const one = await entry('x');
  const perKey = new RecordTable({ keyBytes: one.size * 2, storeBytes: 1 << 20, subkeysPerOwner: 16 });
  assert.equal(perKey.put(one, NOW), 'stored');
  assert.equal(perKey.put(await entry('y'), NOW), 'stored');
  assert.equal(perKey.put(await entry('z'), NOW), 'key-full');
  const total = new RecordTable({ keyBytes: 1 << 20, storeBytes: one.size, subkeysPerOwner: 16 });
  assert.equal(total.put(one, NOW), 'stored');
  assert.equal(total.put(await entry('y'), NOW), 'store-full');
});

test('record table quotas: bytes per owner in all keys, bytes per source address; replacing or evicting an entry gives its bytes back', async () => {
  const [a, b] = [await generateKeyPair('Ed25519'), await generateKeyPair('Ed25519')];
  const entry = async (key: typeof a, k: string, e = NOW + 1000): Promise<VerifiedEntry> => admitted(await signEntry(key, RUN, k, '', cborEncode({ samples: 1 }), e));
  const one = await entry(a, 'progress/1');
  const perOwner = new RecordTable({ ownerBytes: one.size * 2 });
  assert.equal(perOwner.put(one, NOW, 'ip:10.0.0.1'), 'stored');
  assert.equal(perOwner.put(await entry(a, 'progress/2'), NOW, 'ip:10.0.0.1'), 'stored');
  assert.equal(perOwner.put(await entry(a, 'progress/3'), NOW, 'ip:10.0.0.2'), 'owner-full', 'whichever address it comes from');
  assert.equal(perOwner.put(await entry(b, 'progress/3'), NOW, 'ip:10.0.0.1'), 'stored', 'another owner has its own quota');
  assert.equal(perOwner.put(await entry(a, 'progress/1', NOW + 2000), NOW, 'ip:10.0.0.1'), 'stored', 'a newer entry replaces the old one within the quota');
  assert.equal(perOwner.evictExpired(NOW + 1500), 2);
  assert.equal(perOwner.put(await entry(a, 'progress/3'), NOW, 'ip:10.0.0.2'), 'stored', 'evicted entries gave their bytes back');

  const perSource = new RecordTable({ sourceBytes: one.size * 2 });
  assert.equal(perSource.put(await entry(a, 'progress/1'), NOW, 'ip:10.0.0.1'), 'stored');
  assert.equal(perSource.put(await entry(b, 'progress/1'), NOW, 'ip:10.0.0.1'), 'stored');
  const c = await generateKeyPair('Ed25519');
  assert.equal(perSource.put(await entry(c, 'progress/1'), NOW, 'ip:10.0.0.1'), 'source-full', 'a third identity from the same address');
  assert.equal(perSource.put(await entry(c, 'progress/1'), NOW, 'ip:10.0.0.9'), 'stored');
  assert.equal(perSource.put(await entry(c, 'progress/2'), NOW), 'stored', "this peer's own entries are not charged to an address");
});

test('a get answer takes each owner in turn, its own entry first, owners in the order first stored, within the byte cap', async () => {
  const keys = await Promise.all([0, 1, 2].map(() => generateKeyPair('Ed25519')));
  const [honest, flooderA, flooderB] = keys as [Awaited<ReturnType<typeof generateKeyPair>>, Awaited<ReturnType<typeof generateKeyPair>>, Awaited<ReturnType<typeof generateKeyPair>>];
  const entry = async (key: typeof honest, s: string): Promise<VerifiedEntry> => admitted(await signEntry(key, RUN, 'progress', s, cborEncode({ samples: 1 }), NOW + 1000));
  const table = new RecordTable();
  const mine = await entry(honest, '');
  assert.equal(table.put(mine, NOW), 'stored');
  for (const flooder of [flooderA, flooderB]) for (let i = 0; i < 10; i++) assert.equal(table.put(await entry(flooder, `s${i}`), NOW), 'stored');
  assert.equal(table.put(await entry(flooderA, ''), NOW), 'stored');
  const size = cborEncode(mine.wire).length;
  const owners = (entries: VerifiedEntry[]) => entries.map((e) => `${e.owner === mine.owner ? 'h' : e.owner === keys.map((k) => peerIdFromPrivateKey(k).toString())[1] ? 'a' : 'b'}${e.wire.s}`);
  // each entry encodes to about the same size: three fit
  assert.deepEqual(owners(table.answer('progress', NOW, size * 3 + 10)), ['h', 'a', 'bs0']);
  assert.equal(table.answer('progress', NOW).length, 22, 'under the cap, everything');
  assert.deepEqual(table.answer('progress', NOW, size - 1), []);
});

test('a flooding peer is rate-limited; others are not, and tokens refill over time', () => {
  const limiter = new PeerRateLimiter(3, 10);
  const t0 = 1_000_000;
  assert.deepEqual([1, 2, 3, 4].map(() => limiter.take('flooder', t0)), [true, true, true, false]);
  assert.equal(limiter.take('polite', t0), true);
  assert.equal(limiter.take('flooder', t0 + 50), false, 'half a token after 50 ms at 10/s');
  assert.equal(limiter.take('flooder', t0 + 100), true, 'one token after 100 ms');
});
