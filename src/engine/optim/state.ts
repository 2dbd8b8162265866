/**
 * Optimizer state as safetensors bytes, so it travels in a checkpoint beside the weights:
 * tensors `exp_avg.<param>` and `exp_avg_sq.<param>` (F32, the parameter's shape) and metadata
 * `format`, `version`, `kind`, `step`, `config` (JSON) and, for fp16 training, `loss_scaler` (JSON). Bytes may come from other peers, so
 * decoding checks every field against the parameters' layout.
 */
import { endianness } from 'node:os';
import { checkState as checkLossScalerState, type LossScalerState } from '../loss-scaler.js';
import type { ParameterSet } from '../params.js';
import { decodeSafetensors, float32Tensor, fromFloat32AsHalf, safetensorsPieces, toFloat32, type SafeTensor } from '../safetensors.js';
import type { OptimizerKind } from './config.js';
import type { OptimizerState } from './optimizer.js';
import { concatBytes } from '../../util/bytes.js';

const OPTIMIZER_STATE_FORMAT = 'cohort-optimizer-state';
const OPTIMIZER_STATE_VERSION = '1';
const MOMENTS = [
  ['exp_avg', 'expAvg'],
  ['exp_avg_sq', 'expAvgSq'],
] as const;
const KINDS: readonly OptimizerKind[] = ['lamb', 'adamw'];

export class OptimizerStateError extends Error {
  override readonly name = 'OptimizerStateError';
}

// Float32Array bytes are the platform's; safetensors is little-endian (every platform Node ships on is)
const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * `halfFirstMoment`: exp_avg as F16 where its values fit (fromFloat32AsHalf). exp_avg_sq stays F32:
 * its values span more orders of magnitude than fp16 holds, and one flushed to 0 would blow up the
 * step that divides by its square root.
 */
export function encodeOptimizerState(state: OptimizerState, opts: { halfFirstMoment?: boolean } = {}): Uint8Array {
  return concatBytes(encodeOptimizerStatePieces(state, opts));
}

/** `encodeOptimizerState`'s bytes as pieces: the header, then views of the moments' own values (not copied; F16 tensors are new). */
export function encodeOptimizerStatePieces(state: OptimizerState, { halfFirstMoment = false } = {}): Uint8Array[] {
  const tensors = new Map<string, SafeTensor>();
  for (const [prefix, key] of MOMENTS) {
    const set = state[key];
    const tensor = halfFirstMoment && key === 'expAvg' ? fromFloat32AsHalf : float32Tensor;
    for (const spec of set.specs) tensors.set(`${prefix}.${spec.name}`, tensor(set.data.subarray(spec.offset, spec.offset + spec.size), spec.shape));
  }
  return safetensorsPieces(tensors, {
    format: OPTIMIZER_STATE_FORMAT,
    version: OPTIMIZER_STATE_VERSION,
    kind: state.kind,
    step: String(state.step),
    config: JSON.stringify(state.config),
    ...(state.lossScaler ? { loss_scaler: JSON.stringify(state.lossScaler) } : {}),
  });
}

/** Decodes state for parameters laid out as `layout`; throws naming the first missing, misshaped or unexpected tensor. */
export function decodeOptimizerState(bytes: Uint8Array, layout: ParameterSet): OptimizerState {
  const { tensors, metadata } = decodeSafetensors(bytes);
  if (metadata.format !== OPTIMIZER_STATE_FORMAT) throw new OptimizerStateError(`not optimizer state: metadata format is ${JSON.stringify(metadata.format)}, expected "${OPTIMIZER_STATE_FORMAT}"`);
  if (metadata.version !== OPTIMIZER_STATE_VERSION) throw new OptimizerStateError(`optimizer state version ${JSON.stringify(metadata.version)} is not supported; this build reads version ${OPTIMIZER_STATE_VERSION}`);
  const kind = metadata.kind as OptimizerKind;
  if (!KINDS.includes(kind)) throw new OptimizerStateError(`optimizer state kind ${JSON.stringify(metadata.kind)} is unknown; accepted: ${KINDS.join(', ')}`);
  const step = Number(metadata.step);
  if (!/^\d+$/.test(metadata.step ?? '') || !Number.isSafeInteger(step)) throw new OptimizerStateError(`optimizer state step ${JSON.stringify(metadata.step)} is not an integer ≥ 0`);
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(metadata.config ?? '{}') as Record<string, unknown>;
  } catch (err) {
    throw new OptimizerStateError(`optimizer state config is not valid JSON: ${(err as Error).message}`);
  }
  const lossScaler = metadata.loss_scaler === undefined ? undefined : decodeLossScaler(metadata.loss_scaler);
  const expected = new Set<string>();
  const moments = { expAvg: layout.zerosLike(), expAvgSq: layout.zerosLike() };
  for (const [prefix, key] of MOMENTS) {
    const set = moments[key];
    for (const spec of set.specs) {
      const name = `${prefix}.${spec.name}`;
      expected.add(name);
      const t = tensors.get(name);
      if (!t) throw new OptimizerStateError(`optimizer state has no tensor ${name}`);
      if (t.shape.join() !== spec.shape.join()) throw new OptimizerStateError(`optimizer state tensor ${name} has shape [${t.shape.join(', ')}], the parameter has [${spec.shape.join(', ')}]`);
      if (t.dtype === 'F32' && LITTLE_ENDIAN) new Uint8Array(set.data.buffer, set.data.byteOffset + spec.offset * 4, spec.size * 4).set(t.bytes);
      else set.data.set(toFloat32(name, t), spec.offset);
    }
  }
  const extra = [...tensors.keys()].find((name) => !expected.has(name));
  if (extra !== undefined) throw new OptimizerStateError(`optimizer state has tensor ${extra}, which matches no parameter`);
  for (const [prefix, key] of MOMENTS) {
    const bad = moments[key].firstNonFinite();
    if (bad !== undefined) throw new OptimizerStateError(`optimizer state tensor ${prefix}.${bad.name} holds ${bad.value} at element ${bad.index}; moments must be finite numbers`);
  }
  return { kind, step, ...moments, config, ...(lossScaler ? { lossScaler } : {}) };
}

function decodeLossScaler(json: string): LossScalerState {
  try {
    return checkLossScalerState(JSON.parse(json) as LossScalerState);
  } catch (err) {
    throw new OptimizerStateError(`optimizer state loss_scaler is invalid: ${(err as Error).message}`);
  }
}
