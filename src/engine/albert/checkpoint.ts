import fs from 'node:fs';
import path from 'node:path';
import { ParameterSet } from '../params.js';
import { decodeSafetensors, float32Tensor, fromFloat32AsHalf, safetensorsPieces, toFloat32 } from '../safetensors.js';
import { configFromHf, configToHf, type AlbertConfig } from './config.js';
import { albertParamSpecs } from './params.js';
import { concatBytes } from '../../util/bytes.js';

/**
 * HF-compatible model directories: config.json (AlbertConfig fields) + model.safetensors
 * (AlbertForPreTraining state-dict names). Tied tensors are written once, as transformers does:
 * the decoder weight is the word embeddings and `predictions.decoder.bias` is `predictions.bias`.
 */
const CONFIG_FILE = 'config.json';
const WEIGHTS_FILE = 'model.safetensors';

/** Keys a transformers checkpoint may carry that are not parameters, or are aliases of one. */
const ALIASES: Readonly<Record<string, string>> = {
  'predictions.decoder.bias': 'predictions.bias',
  'predictions.decoder.weight': 'albert.embeddings.word_embeddings.weight',
};
const BUFFERS = new Set(['albert.embeddings.position_ids', 'albert.embeddings.token_type_ids']);

/** Parameters (or gradients) as safetensors bytes under their parameter names. */
export function encodeParams(params: ParameterSet, metadata: Record<string, string> = { format: 'pt' }, half = false): Uint8Array {
  return concatBytes(encodeParamsPieces(params, metadata, half));
}

/**
 * `encodeParams`' bytes as pieces: the header, then views of the parameters' own values (not
 * copied); `half`: F16 where the values fit (fromFloat32AsHalf, which makes new bytes).
 */
export function encodeParamsPieces(params: ParameterSet, metadata: Record<string, string> = { format: 'pt' }, half = false): Uint8Array[] {
  return safetensorsPieces(new Map(params.specs.map((s) => [s.name, (half ? fromFloat32AsHalf : float32Tensor)(params.view(s.name), s.shape)])), metadata);
}

/**
 * Reads an AlbertForPreTraining state dict into the parameter layout of `config`. Aliases fill a
 * parameter when its own key is absent; buffers are skipped. Returns the keys it did not use.
 */
export function decodeParams(config: AlbertConfig, file: Uint8Array, source: string): { params: ParameterSet; ignored: string[] } {
  let tensors: ReturnType<typeof decodeSafetensors>['tensors'];
  try {
    ({ tensors } = decodeSafetensors(file));
  } catch (err) {
    // a truncated or overwritten file: say which
    throw new Error(`${source}: ${(err as Error).message}`, { cause: err });
  }
  const params = ParameterSet.allocate(albertParamSpecs(config));
  const used = new Set<string>();
  for (const spec of params.specs) {
    const key = tensors.has(spec.name) ? spec.name : Object.keys(ALIASES).find((k) => ALIASES[k] === spec.name && tensors.has(k));
    if (key === undefined) throw new Error(`${source}: missing tensor ${spec.name} [${spec.shape.join(', ')}]`);
    const t = tensors.get(key)!;
    if (t.shape.join() !== spec.shape.join()) throw new Error(`${source}: tensor ${key} has shape [${t.shape.join(', ')}], expected [${spec.shape.join(', ')}]`);
    params.view(spec.name).set(toFloat32(key, t));
    used.add(key);
  }
  const ignored = [...tensors.keys()].filter((k) => !used.has(k));
  const unknown = ignored.filter((k) => !(k in ALIASES) && !BUFFERS.has(k));
  if (unknown.length > 0) throw new Error(`${source}: unexpected tensors ${unknown.slice(0, 5).join(', ')}${unknown.length > 5 ? ` (+${unknown.length - 5} more)` : ''} — not an AlbertForPreTraining checkpoint of this config`);
  // a diverged run's checkpoint or a hostile donor's state: nothing can be computed from it
  const bad = params.firstNonFinite();
  if (bad !== undefined) throw new Error(`${source}: tensor ${bad.name} holds ${bad.value} at element ${bad.index}; weights must be finite numbers`);
  return { params, ignored };
}

export function saveModel(dir: string, config: AlbertConfig, params: ParameterSet): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, CONFIG_FILE), JSON.stringify(configToHf(config), null, 2) + '\n');
  fs.writeFileSync(path.join(dir, WEIGHTS_FILE), encodeParams(params));
}

export function loadModel(dir: string): { config: AlbertConfig; params: ParameterSet; ignored: string[] } {
  const configPath = path.join(dir, CONFIG_FILE);
  const weightsPath = path.join(dir, WEIGHTS_FILE);
  for (const p of [configPath, weightsPath]) if (!fs.existsSync(p)) throw new Error(`model directory ${dir}: ${path.basename(p)} not found`);
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  } catch (err) {
    throw new Error(`${configPath}: not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const config = configFromHf(json, configPath);
  return { config, ...decodeParams(config, fs.readFileSync(weightsPath), weightsPath) };
}
