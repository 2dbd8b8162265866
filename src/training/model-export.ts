/**
 * `cohort model export`: a model checkpoint as a directory Hugging Face loads —
 * `config.json` (AlbertConfig), `model.safetensors` (AlbertForPreTraining's tensor names) and the
 * run's `tokenizer.json` — from the store (a training session's or a coordinator's checkpoint) or
 * from a model directory (the coordinator's `checkpoints/epoch-N`).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { decodeTrainingState, PEER_STATE_CHECKPOINT, saveStateDir, SWARM_STATE_CHECKPOINT, type TrainingState } from '../collab/index.js';
import { keepTokenizer, keptTokenizer, TOKENIZER_FILE } from '../data/tokenizer-checkpoint.js';
import { configFromHf, decodeParams, loadModel, saveModel, type AlbertConfig, type ParameterSet } from '../engine/index.js';
import { checkpointName, type CheckpointInfo, type Store } from '../store/index.js';
import { writeFolderWhole } from '../util/output-path.js';
import { ModelExportError } from './errors.js';
import { MODEL_CHECKPOINT } from './session.js';

/** Checkpoint kinds that hold a full training state (collab/full-state.ts): a coordinator's and a peer's. */
const STATE_KINDS: readonly string[] = [SWARM_STATE_CHECKPOINT, PEER_STATE_CHECKPOINT];
/** Checkpoint kinds that hold a model: a training session's (parameters as safetensors, meta.config the HF config) and the full states. */
const MODEL_KINDS = [MODEL_CHECKPOINT, ...STATE_KINDS];

export interface ExportedModel {
  readonly out: string;
  /** The store checkpoint exported (absent when the source was a directory). */
  readonly checkpoint?: { readonly id: number; readonly kind: string; readonly epoch: number };
  readonly parameters: number;
  readonly tokenizerSha256: string;
}

export interface ExportOptions {
  /** Reports each damaged checkpoint an older one stands in for. */
  readonly onSkip?: (message: string) => void;
  /** Also the optimizer state and the epoch (a state directory, what `cohort run --resume-from` reads): full-state checkpoints only. */
  readonly withState?: boolean;
}

/** What to export: a model directory, or the store's newest model checkpoint (of `epoch` when given). */
export type ExportSource = { readonly dir: string } | { readonly epoch?: number };

/**
 * Exports `from` to `out`. From the store: the newest checkpoint (of the epoch) that verifies and
 * decodes, older ones standing in for damaged ones, each reported through `onSkip`. The tokenizer is
 * the one the checkpoint names (coordinator checkpoints carry it), else the one the directory holds,
 * else the store's prepared data's of the model's vocabulary; ModelExportError says what is missing.
 * `store` opens the data directory's store when the export needs it: a model directory that holds
 * its tokenizer.json needs none.
 */
export function exportModel(store: () => Store, from: ExportSource, out: string, opts: ExportOptions = {}): ExportedModel {
  const source = 'dir' in from ? fromDirectory(from.dir) : fromStore(store(), from.epoch, opts.onSkip);
  if (opts.withState && !source.state?.optimizer) throw new ModelExportError(`${source.what} holds no optimizer state: --state exports a full-state checkpoint (a coordinator's or a training peer's)`);
  const tokenizer = source.tokenizer ?? tokenizerOf(store(), source.config, source.what);
  try {
    writeFolderWhole(out, (dir) => {
      if (opts.withState) saveStateDir(dir, source.state!);
      else saveModel(dir, source.config, source.params);
      fs.writeFileSync(path.join(dir, TOKENIZER_FILE), tokenizer.bytes);
    });
  } catch (err) {
    throw new ModelExportError((err as Error).message, { cause: err });
  }
  return { out, ...(source.checkpoint ? { checkpoint: source.checkpoint } : {}), parameters: source.params.size, tokenizerSha256: tokenizer.sha256 };
}

interface Source {
  readonly what: string;
  readonly config: AlbertConfig;
  readonly params: ParameterSet;
  readonly checkpoint?: ExportedModel['checkpoint'];
  readonly tokenizer?: { readonly bytes: Buffer; readonly sha256: string };
  /** A full-state checkpoint's epoch and optimizer state with the model. */
  readonly state?: TrainingState;
}

function fromDirectory(dir: string): Source {
  let model: ReturnType<typeof loadModel>;
  try {
    model = loadModel(dir);
  } catch (err) {
    throw new ModelExportError((err as Error).message, { cause: err });
  }
  const { config, params } = model;
  const file = path.join(dir, TOKENIZER_FILE);
  const bytes = fs.existsSync(file) ? fs.readFileSync(file) : undefined;
  return { what: `model directory ${dir}`, config, params, ...(bytes ? { tokenizer: { bytes, sha256: createHash('sha256').update(bytes).digest('hex') } } : {}) };
}

function fromStore(store: Store, epoch: number | undefined, onSkip: ((message: string) => void) | undefined): Source {
  const all = MODEL_KINDS.flatMap((kind) => store.checkpoints.list(kind)).sort((a, b) => b.id - a.id);
  const candidates = all.filter((c) => epoch === undefined || c.epoch === epoch);
  const held = (): string => {
    const have = [...new Set(all.map((c) => c.epoch))].sort((a, b) => a - b);
    return have.length > 0 ? ` (epochs held: ${have.join(', ')})` : '';
  };
  if (candidates.length === 0) throw new ModelExportError(`no model checkpoint${epoch === undefined ? '' : ` of epoch ${epoch}`} in ${store.checkpoints.file}${held()}`);
  const damaged: string[] = [];
  const found = store.checkpoints.loadNewestReadable(candidates, (bytes, info) => {
    const what = checkpointName(info);
    return STATE_KINDS.includes(info.kind) ? stateOf(decodeTrainingState(bytes, what)) : modelOf(info, bytes, what);
  }, (message, err) => {
    damaged.push(err.message);
    onSkip?.(message);
  });
  if (!found) throw new ModelExportError(`no model checkpoint${epoch === undefined ? '' : ` of epoch ${epoch}`} in ${store.checkpoints.file} is readable${held()}: ${damaged.join('; ')}`);
  const { info, decoded: model } = found;
  const what = checkpointName(info);
  // coordinator checkpoints name the tokenizer of their run
  const sha = info.meta['tokenizerSha256'];
  let tokenizer: Source['tokenizer'];
  if (typeof sha === 'string') {
    const bytes = keptTokenizer(store, sha);
    if (bytes === undefined) throw new ModelExportError(`${what} names tokenizer ${sha}, which ${store.checkpoints.file} no longer holds`);
    tokenizer = { bytes, sha256: sha };
  }
  return { what, ...model, checkpoint: { id: info.id, kind: info.kind, epoch: info.epoch }, ...(tokenizer ? { tokenizer } : {}) };
}

function stateOf(state: TrainingState): { config: AlbertConfig; params: ParameterSet; state: TrainingState } {
  return { config: state.config, params: state.params, state };
}

/** A training session's checkpoint: its HF config in meta, its parameters as safetensors. */
function modelOf(info: CheckpointInfo, bytes: Uint8Array, what: string): { config: AlbertConfig; params: ParameterSet } {
  const config = configFromHf(info.meta['config'], what);
  return { config, params: decodeParams(config, bytes, what).params };
}

function tokenizerOf(store: Store, config: AlbertConfig, what: string): { bytes: Buffer; sha256: string } {
  const sha256 = keepTokenizer(store, config.vocabSize);
  if (sha256 === undefined) throw new ModelExportError(`${what} carries no tokenizer, and ${store.file} has no prepared data with its vocabulary of ${config.vocabSize} tokens: prepare the run's data in this data directory (cohort data prepare) and export again`);
  return { bytes: keptTokenizer(store, sha256)!, sha256 };
}
