/**
 * The training state peers hand each other (load_state_from_peers) and the coordinator checkpoints:
 * model config, parameters (safetensors) and optimizer state, with the swarm epoch. One CBOR map.
 */
import { decode as cborDecode, encode as cborEncode } from 'cborg';
import { checkConfig, configFromHf, configToHf, type AlbertConfig } from '../engine/albert/config.js';
import { decodeParams, encodeParams } from '../engine/albert/checkpoint.js';
import { decodeOptimizerState, encodeOptimizerState, type OptimizerState } from '../engine/optim/index.js';
import type { ParameterSet } from '../engine/params.js';

export interface TrainingState {
  readonly epoch: number;
  readonly config: AlbertConfig;
  readonly params: ParameterSet;
  /** Absent in a state that carries only the model. */
  readonly optimizer?: OptimizerState;
}

interface Wire {
  v: 1;
  epoch: number;
  config: Record<string, unknown>;
  params: Uint8Array;
  optimizer?: Uint8Array;
}

export function encodeTrainingState(s: TrainingState): Uint8Array {
  const wire: Wire = { v: 1, epoch: s.epoch, config: configToHf(s.config), params: encodeParams(s.params), ...(s.optimizer ? { optimizer: encodeOptimizerState(s.optimizer) } : {}) };
  return cborEncode(wire);
}

/** Decodes and checks a state; `source` names where it came from in errors (e.g. the donor's peer id). */
export function decodeTrainingState(bytes: Uint8Array, source: string): TrainingState {
  let wire: Wire;
  try {
    wire = cborDecode(bytes) as Wire;
  } catch (err) {
    throw new Error(`training state from ${source} is not CBOR: ${(err as Error).message}`, { cause: err });
  }
  if (wire?.v !== 1 || !Number.isInteger(wire.epoch) || !(wire.params instanceof Uint8Array)) throw new Error(`training state from ${source} has an unknown layout (version ${String(wire?.v)})`);
  const config = checkConfig(configFromHf(wire.config, `training state from ${source}`));
  const { params } = decodeParams(config, wire.params, `training state from ${source}`);
  const optimizer = wire.optimizer ? decodeOptimizerState(wire.optimizer, params) : undefined;
  return { epoch: wire.epoch, config, params, ...(optimizer ? { optimizer } : {}) };
}
