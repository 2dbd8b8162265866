import { ParameterSet, type ParamSpec } from '../params.js';
import { Rng } from '../rng.js';
import type { AlbertConfig } from './config.js';

/** HF AlbertForPreTraining state-dict names; Linear weights are torch's [out, in]. */
export const LAYER = 'albert.encoder.albert_layer_groups.0.albert_layers.0.';

export function albertParamSpecs(c: AlbertConfig): ParamSpec[] {
  const { vocabSize: V, embeddingSize: E, hiddenSize: H, intermediateSize: I } = c;
  const linear = (name: string, out: number, inp: number): ParamSpec[] => [
    { name: `${name}.weight`, shape: [out, inp] },
    { name: `${name}.bias`, shape: [out] },
  ];
  const norm = (name: string, n: number): ParamSpec[] => [
    { name: `${name}.weight`, shape: [n] },
    { name: `${name}.bias`, shape: [n] },
  ];
  return [
    { name: 'albert.embeddings.word_embeddings.weight', shape: [V, E] },
    { name: 'albert.embeddings.position_embeddings.weight', shape: [c.maxPositionEmbeddings, E] },
    { name: 'albert.embeddings.token_type_embeddings.weight', shape: [c.typeVocabSize, E] },
    ...norm('albert.embeddings.LayerNorm', E),
    ...linear('albert.encoder.embedding_hidden_mapping_in', H, E),
    ...norm(`${LAYER}full_layer_layer_norm`, H),
    ...linear(`${LAYER}attention.query`, H, H),
    ...linear(`${LAYER}attention.key`, H, H),
    ...linear(`${LAYER}attention.value`, H, H),
    ...linear(`${LAYER}attention.dense`, H, H),
    ...norm(`${LAYER}attention.LayerNorm`, H),
    ...linear(`${LAYER}ffn`, I, H),
    ...linear(`${LAYER}ffn_output`, H, I),
    ...linear('albert.pooler', H, H),
    { name: 'predictions.bias', shape: [V] },
    ...linear('predictions.dense', E, H),
    ...norm('predictions.LayerNorm', E),
    ...linear('sop_classifier.classifier', 2, H),
  ];
}

const isNorm = (name: string) => /LayerNorm\.weight$|layer_norm\.weight$/.test(name);

/** HF's _init_weights: weights and embeddings normal(0, initializer_range), biases 0, LayerNorm 1/0, the padding row 0. */
export function initAlbertParams(c: AlbertConfig, seed: number): ParameterSet {
  const params = ParameterSet.allocate(albertParamSpecs(c));
  const rng = new Rng(seed);
  for (const spec of params.specs) {
    const view = params.view(spec.name);
    if (isNorm(spec.name)) view.fill(1);
    else if (spec.shape.length === 2) rng.normal(view, 0, c.initializerRange);
  }
  const E = c.embeddingSize;
  params.view('albert.embeddings.word_embeddings.weight').fill(0, c.padTokenId * E, (c.padTokenId + 1) * E);
  return params;
}
