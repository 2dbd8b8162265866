import { createHash } from 'node:crypto';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { decode as cborDecode, encode as cborEncode } from 'cborg';
import { z } from 'zod';
import { bytes } from './schema.js';
import { RUN_ID_PATTERN } from './constants.js';
import { JoinCodeError } from './errors.js';

/**
 * A join code is what a coordinator prints and a volunteer pastes: one line holding the run id,
 * the bootstrap multiaddrs and the pre-shared key of a closed swarm, if any.
 *
 *   `cohort:` + base64url( version byte | CBOR {r: run id, b: [multiaddr bytes…], k?: 32-byte PSK} | first 4 bytes of SHA-256 of what precedes )
 *
 * The checksum catches a truncated or mistyped paste before any network traffic.
 */
export interface JoinInfo {
  readonly runId: string;
  readonly bootstrap: readonly Multiaddr[];
  /** 32-byte pre-shared key of a private swarm. */
  readonly psk?: Uint8Array;
}

const JOIN_CODE_PREFIX = 'cohort:';
const VERSION = 1;
const CHECKSUM_BYTES = 4;
const MAX_CODE_CHARS = 8192;

const payloadSchema = z.strictObject({
  r: z.string().regex(RUN_ID_PATTERN, 'not a valid run id'),
  b: z.array(bytes()).min(1, 'no bootstrap address').max(32, 'more than 32 bootstrap addresses'),
  k: z
    .instanceof(Uint8Array)
    .refine((k) => k.length === 32, 'pre-shared key must be 32 bytes')
    .optional(),
});

export function encodeJoinCode(info: JoinInfo): string {
  if (!RUN_ID_PATTERN.test(info.runId)) throw new JoinCodeError(`cannot encode a join code: run id "${info.runId}" is invalid`);
  if (info.bootstrap.length === 0) throw new JoinCodeError('cannot encode a join code without a bootstrap address');
  for (const addr of info.bootstrap) {
    if (addr.getComponents().at(-1)?.name !== 'p2p') throw new JoinCodeError(`cannot encode a join code: bootstrap address ${addr.toString()} lacks its /p2p/<peer id>`);
  }
  if (info.psk !== undefined && info.psk.length !== 32) throw new JoinCodeError(`cannot encode a join code: pre-shared key is ${info.psk.length} bytes, not 32`);
  const payload = cborEncode({ r: info.runId, b: info.bootstrap.map((a) => a.bytes), ...(info.psk ? { k: info.psk } : {}) });
  const body = new Uint8Array(1 + payload.length);
  body[0] = VERSION;
  body.set(payload, 1);
  return JOIN_CODE_PREFIX + Buffer.concat([body, checksum(body)]).toString('base64url');
}

export function decodeJoinCode(code: string): JoinInfo {
  const text = code.trim();
  if (text.length > MAX_CODE_CHARS) throw new JoinCodeError(`join code is ${text.length} characters; a valid one has at most ${MAX_CODE_CHARS}`);
  if (!text.startsWith(JOIN_CODE_PREFIX)) throw new JoinCodeError(`join code must start with "${JOIN_CODE_PREFIX}" (got "${text.slice(0, 12)}…")`);
  const b64 = text.slice(JOIN_CODE_PREFIX.length);
  if (b64 === '') throw new JoinCodeError(`join code has nothing after "${JOIN_CODE_PREFIX}"; was it copied whole?`);
  if (!/^[A-Za-z0-9_-]+$/.test(b64)) throw new JoinCodeError('join code contains characters outside base64url (A–Z, a–z, 0–9, "-", "_"); was it copied whole?');
  const raw = Buffer.from(b64, 'base64url');
  if (raw.length < 1 + CHECKSUM_BYTES + 1) throw new JoinCodeError('join code is too short; was it copied whole?');
  const body = raw.subarray(0, raw.length - CHECKSUM_BYTES);
  if (!checksum(body).equals(raw.subarray(raw.length - CHECKSUM_BYTES))) throw new JoinCodeError('join code checksum does not match: it was truncated or mistyped');
  if (body[0] !== VERSION) throw new JoinCodeError(`join code version ${body[0]} is not supported by this Cohort (supports ${VERSION}); update Cohort`);
  let decoded: unknown;
  try {
    decoded = cborDecode(body.subarray(1));
  } catch (err) {
    throw new JoinCodeError(`join code payload is not valid CBOR (${(err as Error).message})`);
  }
  const parsed = payloadSchema.safeParse(decoded);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new JoinCodeError(`join code payload is invalid: ${issue?.path.join('.') || 'payload'}: ${issue?.message ?? 'bad value'}`);
  }
  const bootstrap = parsed.data.b.map((bytes, i) => {
    let addr: Multiaddr;
    try {
      addr = multiaddr(bytes);
    } catch (err) {
      throw new JoinCodeError(`join code bootstrap address #${i + 1} is not a valid multiaddr (${(err as Error).message})`);
    }
    if (addr.getComponents().at(-1)?.name !== 'p2p') throw new JoinCodeError(`join code bootstrap address ${addr.toString()} lacks its /p2p/<peer id>`);
    return addr;
  });
  return { runId: parsed.data.r, bootstrap, ...(parsed.data.k ? { psk: parsed.data.k } : {}) };
}

/** True when the string looks like a join code rather than a multiaddr list (used by --initial-peers). */
export function isJoinCode(text: string): boolean {
  return text.trim().startsWith(JOIN_CODE_PREFIX);
}

/** The join code of an initial-peers list that is one (a single `cohort:…` entry), else undefined: the list is multiaddrs. */
export function soleJoinCode(initialPeers: readonly string[]): string | undefined {
  return initialPeers.length === 1 && isJoinCode(initialPeers[0]!) ? initialPeers[0] : undefined;
}

function checksum(body: Uint8Array): Buffer {
  return createHash('sha256').update(body).digest().subarray(0, CHECKSUM_BYTES);
}
