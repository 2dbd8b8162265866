import fs from 'node:fs';
import path from 'node:path';
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { z } from 'zod';
import type { Store } from '../store/index.js';

/** What the swarm keeps in a node's store: its identity (settings) and the peers it has seen. */
export type SwarmStore = Pick<Store, 'file' | 'settings' | 'peers'>;
import { IdentityError } from './errors.js';

/** Settings-store key of the node's own identity (protobuf-encoded private key, base64). */
const IDENTITY_SETTING = 'swarm.identity';

const storedKey = z.string().regex(/^[A-Za-z0-9+/=]+$/);

/**
 * The node's Ed25519 identity, so its peer id survives restarts (its DHT records and the others'
 * memory of it stay valid). Order: the key file if given (created when missing, as hivemind's
 * `identity_path` does), else the key kept in the store, else a fresh key, saved to the store
 * when there is one.
 */
export async function loadIdentity(options: { keyFile?: string; store?: Pick<SwarmStore, 'file' | 'settings'> }): Promise<PrivateKey> {
  if (options.keyFile !== undefined) return loadKeyFile(options.keyFile);
  const { store } = options;
  const saved = store?.settings.get(IDENTITY_SETTING, storedKey);
  if (saved !== undefined) return decodeKey(Buffer.from(saved, 'base64'), `the identity stored in ${store!.file}`);
  const key = await generateKeyPair('Ed25519');
  store?.settings.set(IDENTITY_SETTING, Buffer.from(privateKeyToProtobuf(key)).toString('base64'), storedKey);
  return key;
}

async function loadKeyFile(file: string): Promise<PrivateKey> {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new IdentityError(`--identity ${file}: cannot be read (${(err as Error).message})`);
    const key = await generateKeyPair('Ed25519');
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    // 'wx' so two nodes started at once cannot both create (and one overwrite) the file.
    fs.writeFileSync(file, privateKeyToProtobuf(key), { mode: 0o600, flag: 'wx' });
    return key;
  }
  return decodeKey(bytes, `--identity ${file}`);
}

function decodeKey(bytes: Uint8Array, source: string): PrivateKey {
  let key: PrivateKey;
  try {
    key = privateKeyFromProtobuf(bytes);
  } catch (err) {
    throw new IdentityError(`${source}: not a libp2p private key (${(err as Error).message})`);
  }
  if (key.type !== 'Ed25519') throw new IdentityError(`${source}: a ${key.type} key; Cohort identities are Ed25519`);
  return key;
}
