/**
 * The training state peers hand each other (load_state_from_peers) and the coordinator checkpoints:
 * model config, parameters (safetensors) and optimizer state, with the swarm epoch. One CBOR map.
 */
import { decode as cborDecode, encode as cborEncode } from 'cborg';
import { z } from 'zod';
import { checkConfig, configFromHf, configToHf, type AlbertConfig, decodeParams, encodeParamsPieces, decodeOptimizerState, encodeOptimizerStatePieces, type OptimizerState, type ParameterSet } from '../engine/index.js';
import { TrainingStateError } from './errors.js';
import { concatBytes } from '../util/bytes.js';

export interface TrainingState {
  readonly epoch: number;
  readonly config: AlbertConfig;
  readonly params: ParameterSet;
  /** Absent in a state that carries only the model. */
  readonly optimizer?: OptimizerState;
  /** DiLoCo's outer momentum (in the parameters' layout); absent in other runs' states. */
  readonly outerMomentum?: ParameterSet;
}

const bytes = z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'expected bytes');

/** The wire form's version: a state of another is another Cohort release's (a checkpoint kept across a downgrade). */
const STATE_VERSION = 1;

/** The wire form (CBOR map), version 1; see docs/protocol.md ("State download"). */
const wireSchema = z.strictObject({
  v: z.literal(STATE_VERSION),
  epoch: z.number().int().min(0),
  config: z.record(z.string(), z.unknown()),
  params: bytes,
  optimizer: bytes.optional(),
  /** safetensors, F32, the parameters' tensor names. */
  outerMomentum: bytes.optional(),
});
type Wire = z.infer<typeof wireSchema>;

/**
 * `fp16`: parameters and first moments travel as F16 where their values fit in fp16's range (a
 * tensor with a larger value stays F32, never ±Inf), second moments as F32: 8 bytes per parameter
 * instead of 12. Decoding reads either.
 */
export function encodeTrainingState(s: TrainingState, opts: { fp16?: boolean } = {}): Uint8Array {
  return concatBytes(encodeTrainingStatePieces(s, opts));
}

/**
 * `encodeTrainingState`'s bytes as pieces whose tensor pieces are views of `s`'s own values (nothing
 * large is copied): a checkpoint of hundreds of MiB is hashed and written piece by piece. The map's
 * entries go in cborg's canonical order (shorter keys first), so the bytes are those cborg gives the
 * whole map.
 */
export function encodeTrainingStatePieces(s: TrainingState, { fp16 = false } = {}): Uint8Array[] {
  const small: Array<[keyof Wire, unknown]> = [
    ['v', STATE_VERSION],
    ['epoch', s.epoch],
    ['config', configToHf(s.config)],
  ];
  const large: Array<[keyof Wire, Uint8Array[]]> = [['params', encodeParamsPieces(s.params, undefined, fp16)]];
  if (s.optimizer) large.push(['optimizer', encodeOptimizerStatePieces(s.optimizer, { halfFirstMoment: fp16 })]);
  if (s.outerMomentum) large.push(['outerMomentum', encodeParamsPieces(s.outerMomentum)]);
  const pieces: Uint8Array[] = [Uint8Array.of(CBOR_MAP | (small.length + large.length))];
  for (const [key, value] of small) pieces.push(cborEncode(key), cborEncode(value));
  for (const [key, value] of large) pieces.push(cborEncode(key), cborBytesHead(value.reduce((n, p) => n + p.byteLength, 0)), ...value);
  return pieces;
}

/** CBOR's major type 5 (map) with the entry count in the low bits (< 24 entries). */
const CBOR_MAP = 0xa0;

/** The head of a CBOR byte string (major type 2) of `length` bytes (RFC 8949 §3: the length in 0, 1, 2, 4 or 8 big-endian bytes). */
function cborBytesHead(length: number): Uint8Array {
  if (length < 24) return Uint8Array.of(0x40 | length);
  const size = length < 2 ** 8 ? 1 : length < 2 ** 16 ? 2 : length < 2 ** 32 ? 4 : 8;
  const head = Buffer.alloc(1 + size);
  head[0] = 0x40 | (24 + Math.log2(size)); // additional info 24–27: the length follows in 1, 2, 4, 8 bytes
  if (size === 8) head.writeBigUInt64BE(BigInt(length), 1);
  else head.writeUIntBE(length, 1, size);
  return head;
}

/** Decodes and checks a state; `source` names where it came from in errors (e.g. the donor's peer id). */
export function decodeTrainingState(bytes: Uint8Array, source: string): TrainingState {
  let raw: unknown;
  try {
    raw = cborDecode(bytes);
  } catch (err) {
    throw new TrainingStateError(`training state from ${source} is not CBOR: ${(err as Error).message}`, { cause: err });
  }
  const v = typeof raw === 'object' && raw !== null && 'v' in raw ? raw.v : undefined;
  if (typeof v === 'number' && v !== STATE_VERSION) {
    throw new TrainingStateError(`training state from ${source} is of version ${v}, this Cohort reads version ${STATE_VERSION}: another Cohort release wrote it (if this one is older, update it to use the state)`);
  }
  const parsed = wireSchema.safeParse(raw);
  if (!parsed.success) throw new TrainingStateError(`training state from ${source} has an unknown layout: ${z.prettifyError(parsed.error)}`);
  const wire = parsed.data;
  const config = checkConfig(configFromHf(wire.config, `training state from ${source}`));
  const { params } = decodeParams(config, wire.params, `training state from ${source}`);
  const optimizer = wire.optimizer ? decodeOptimizerState(wire.optimizer, params) : undefined;
  const outerMomentum = wire.outerMomentum ? decodeParams(config, wire.outerMomentum, `outer momentum of the training state from ${source}`).params : undefined;
  return { epoch: wire.epoch, config, params, ...(optimizer ? { optimizer } : {}), ...(outerMomentum ? { outerMomentum } : {}) };
}
