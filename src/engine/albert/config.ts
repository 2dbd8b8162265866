import { z } from 'zod';

/** The ALBERT hyper-parameters Cohort trains with (one layer group, one inner layer, GELU-new, no dropout). */
export interface AlbertConfig {
  readonly vocabSize: number;
  /** E: the factorized embedding width. */
  readonly embeddingSize: number;
  /** H */
  readonly hiddenSize: number;
  /** L: how many times the one shared layer is applied. */
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly intermediateSize: number;
  readonly maxPositionEmbeddings: number;
  readonly typeVocabSize: number;
  readonly layerNormEps: number;
  readonly initializerRange: number;
  /** Row of the word embeddings that receives no gradient from the input lookup (torch's padding_idx). */
  readonly padTokenId: number;
}

const common = { maxPositionEmbeddings: 512, typeVocabSize: 2, layerNormEps: 1e-12, initializerRange: 0.02, padTokenId: 0 };

export const PRESETS = {
  /** ≈ 0.1M parameters: for tests. */
  tiny: { ...common, vocabSize: 1000, embeddingSize: 32, hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, intermediateSize: 128, maxPositionEmbeddings: 128 },
  /** albert-base-v2 shape, ≈ 11.7M parameters. */
  base: { ...common, vocabSize: 30000, embeddingSize: 128, hiddenSize: 768, numHiddenLayers: 12, numAttentionHeads: 12, intermediateSize: 3072 },
  /** albert-large-v2 shape, ≈ 17.7M parameters. */
  large: { ...common, vocabSize: 30000, embeddingSize: 128, hiddenSize: 1024, numHiddenLayers: 24, numAttentionHeads: 16, intermediateSize: 4096 },
} as const satisfies Record<string, AlbertConfig>;

export type PresetName = keyof typeof PRESETS;
export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[];

/**
 * Largest sizes accepted (a config comes from files and other peers): well past albert-xxlarge
 * (vocabulary 30,000, hidden 4,096, intermediate 16,384, 12 layers), so an absurd config is an
 * error naming the field, not an allocation failure. MAX_TENSOR_ELEMENTS bounds each weight matrix
 * (4 GiB of float32) where two sizes within their limits multiply to more.
 */
const CONFIG_LIMITS = {
  vocabSize: 1_000_000,
  embeddingSize: 8192,
  hiddenSize: 16_384,
  numHiddenLayers: 256,
  numAttentionHeads: 256,
  intermediateSize: 65_536,
  maxPositionEmbeddings: 65_536,
  typeVocabSize: 1024,
} as const satisfies Partial<Record<keyof AlbertConfig, number>>;

const MAX_TENSOR_ELEMENTS = 2 ** 30;

const HF_NAMES: Record<keyof typeof CONFIG_LIMITS, string> = {
  vocabSize: 'vocab_size',
  embeddingSize: 'embedding_size',
  hiddenSize: 'hidden_size',
  numHiddenLayers: 'num_hidden_layers',
  numAttentionHeads: 'num_attention_heads',
  intermediateSize: 'intermediate_size',
  maxPositionEmbeddings: 'max_position_embeddings',
  typeVocabSize: 'type_vocab_size',
};

export function checkConfig(c: AlbertConfig): AlbertConfig {
  for (const [k, v] of Object.entries(c)) if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`albert config: ${k} must be a number, got ${String(v)}`);
  for (const [k, max] of Object.entries(CONFIG_LIMITS) as Array<[keyof typeof CONFIG_LIMITS, number]>) {
    if (c[k] > max) throw new Error(`albert config: ${HF_NAMES[k]} ${c[k]} is beyond the largest supported (${max})`);
  }
  const matrices: Array<[keyof typeof CONFIG_LIMITS, keyof typeof CONFIG_LIMITS]> = [
    ['vocabSize', 'embeddingSize'],
    ['maxPositionEmbeddings', 'embeddingSize'],
    ['hiddenSize', 'intermediateSize'],
  ];
  for (const [a, b] of matrices) {
    if (c[a] * c[b] > MAX_TENSOR_ELEMENTS) throw new Error(`albert config: ${HF_NAMES[a]} ${c[a]} × ${HF_NAMES[b]} ${c[b]} is a weight matrix beyond the largest supported (${MAX_TENSOR_ELEMENTS} elements)`);
  }
  if (c.hiddenSize % c.numAttentionHeads !== 0) throw new Error(`albert config: hidden_size ${c.hiddenSize} is not a multiple of num_attention_heads ${c.numAttentionHeads}`);
  if (c.padTokenId < 0 || c.padTokenId >= c.vocabSize) throw new Error(`albert config: pad_token_id ${c.padTokenId} is outside the vocabulary (${c.vocabSize})`);
  return c;
}

const positive = z.number().int().positive();

/** HF AlbertConfig JSON (config.json); only the architecture Cohort implements is accepted. */
const hfConfigSchema = z.looseObject({
  vocab_size: positive,
  embedding_size: positive,
  hidden_size: positive,
  num_hidden_layers: positive,
  num_attention_heads: positive,
  intermediate_size: positive,
  max_position_embeddings: positive.default(512),
  type_vocab_size: positive.default(2),
  layer_norm_eps: z.number().positive().default(1e-12),
  initializer_range: z.number().positive().default(0.02),
  pad_token_id: z.number().int().nonnegative().default(0),
  num_hidden_groups: z.literal(1, { error: 'only num_hidden_groups 1 is supported' }).default(1),
  inner_group_num: z.literal(1, { error: 'only inner_group_num 1 is supported' }).default(1),
  hidden_act: z.literal('gelu_new', { error: 'only hidden_act "gelu_new" is supported' }).default('gelu_new'),
  position_embedding_type: z.literal('absolute', { error: 'only position_embedding_type "absolute" is supported' }).default('absolute'),
});

export function configFromHf(json: unknown, source = 'config.json'): AlbertConfig {
  const parsed = hfConfigSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${source}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const j = parsed.data;
  return checkConfig({
    vocabSize: j.vocab_size,
    embeddingSize: j.embedding_size,
    hiddenSize: j.hidden_size,
    numHiddenLayers: j.num_hidden_layers,
    numAttentionHeads: j.num_attention_heads,
    intermediateSize: j.intermediate_size,
    maxPositionEmbeddings: j.max_position_embeddings,
    typeVocabSize: j.type_vocab_size,
    layerNormEps: j.layer_norm_eps,
    initializerRange: j.initializer_range,
    padTokenId: j.pad_token_id,
  });
}

/** config.json as transformers writes it for AlbertForPreTraining (loads with AlbertConfig.from_pretrained). */
export function configToHf(c: AlbertConfig): Record<string, unknown> {
  return {
    architectures: ['AlbertForPreTraining'],
    model_type: 'albert',
    vocab_size: c.vocabSize,
    embedding_size: c.embeddingSize,
    hidden_size: c.hiddenSize,
    num_hidden_layers: c.numHiddenLayers,
    num_hidden_groups: 1,
    num_attention_heads: c.numAttentionHeads,
    intermediate_size: c.intermediateSize,
    inner_group_num: 1,
    hidden_act: 'gelu_new',
    hidden_dropout_prob: 0,
    attention_probs_dropout_prob: 0,
    classifier_dropout_prob: 0.1,
    max_position_embeddings: c.maxPositionEmbeddings,
    type_vocab_size: c.typeVocabSize,
    initializer_range: c.initializerRange,
    layer_norm_eps: c.layerNormEps,
    position_embedding_type: 'absolute',
    pad_token_id: c.padTokenId,
    bos_token_id: 2,
    eos_token_id: 3,
  };
}
