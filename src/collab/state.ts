/**
 * The training state peers hand each other (load_state_from_peers) and the coordinator checkpoints:
 * model config, parameters (safetensors) and optimizer state, with the swarm epoch. One CBOR map.
 */
import { decode as cborDecode, encode as cborEncode } from 'cborg';
import { z } from 'zod';
import { checkConfig, configFromHf, configToHf, type AlbertConfig, decodeParams, encodeParams, decodeOptimizerState, encodeOptimizerState, type OptimizerState, type ParameterSet } from '../engine/index.js';
import { TrainingStateError } from './errors.js';

export interface TrainingState {
  readonly epoch: number;
  readonly config: AlbertConfig;
  readonly params: ParameterSet;
  /** Absent in a state that carries only the model. */
  readonly optimizer?: OptimizerState;
}

const bytes = z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'expected bytes');

/** The wire form (CBOR map), version 1; see docs/protocol.md ("State download"). */
const wireSchema = z.strictObject({
  v: z.literal(1),
  epoch: z.number().int().min(0),
  config: z.record(z.string(), z.unknown()),
  params: bytes,
  optimizer: bytes.optional(),
});
type Wire = z.infer<typeof wireSchema>;

/**
 * `fp16`: parameters and first moments travel as F16 where their values fit in fp16's range (a
 * tensor with a larger value stays F32, never ±Inf), second moments as F32: 8 bytes per parameter
 * instead of 12. Decoding reads either.
 */
export function encodeTrainingState(s: TrainingState, { fp16 = false } = {}): Uint8Array {
  const optimizer = s.optimizer ? { optimizer: encodeOptimizerState(s.optimizer, { halfFirstMoment: fp16 }) } : {};
  const wire: Wire = { v: 1, epoch: s.epoch, config: configToHf(s.config), params: encodeParams(s.params, undefined, fp16), ...optimizer };
  return cborEncode(wire);
}

/** Decodes and checks a state; `source` names where it came from in errors (e.g. the donor's peer id). */
export function decodeTrainingState(bytes: Uint8Array, source: string): TrainingState {
  let raw: unknown;
  try {
    raw = cborDecode(bytes);
  } catch (err) {
    throw new TrainingStateError(`training state from ${source} is not CBOR: ${(err as Error).message}`, { cause: err });
  }
  const parsed = wireSchema.safeParse(raw);
  if (!parsed.success) throw new TrainingStateError(`training state from ${source} has an unknown layout: ${z.prettifyError(parsed.error)}`);
  const wire = parsed.data;
  const config = checkConfig(configFromHf(wire.config, `training state from ${source}`));
  const { params } = decodeParams(config, wire.params, `training state from ${source}`);
  const optimizer = wire.optimizer ? decodeOptimizerState(wire.optimizer, params) : undefined;
  return { epoch: wire.epoch, config, params, ...(optimizer ? { optimizer } : {}) };
}
