import fs from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import { PRESET_NAMES, PRESETS, type PresetName } from '../../engine/albert/config.js';
import { PRECISIONS, type Precision } from '../../engine/albert/graph.js';
import { batchFromJson } from '../../engine/batch.js';
import { providerPrecisionProblem } from '../../engine/providers.js';
import type { ProviderChoice } from '../../engine/index.js';
import { ConfigError } from '../../config/load.js';
import { CommandFailure } from '../failure.js';
import type { ExportSource } from '../../training/model-export.js';
import type { Store } from '../../store/index.js';
import { commandContext, flagAction } from '../context.js';
import { flagRow, outputFlag, parseFlagValue, requiredFlag } from '../flag-table.js';
import { writeFileWhole, writeFolderWhole } from '../../util/output-path.js';

export const PROVIDERS = ['auto', 'cpu', 'cuda', 'webgpu'] as const satisfies readonly ProviderChoice[];
/** --provider and --precision together: a provider that cannot train at that precision is a usage error. */
export function checkProviderFlags(provider: ProviderChoice, precision: Precision): void {
  const problem = providerPrecisionProblem(provider, precision);
  if (problem !== undefined) throw new ConfigError('--precision', `${precision}: ${problem}`);
}
/** What fp16 means, for every command with --precision. */
export const PRECISION_NOTE = '(fp16: float16 matmuls on float32 weights with dynamic loss scaling, meant for CUDA; on CPU onnxruntime computes the float16 matmuls in float32 behind casts)';
const int = z.number().int();

const INIT_FLAGS = {
  preset: flagRow({ schema: z.enum(PRESET_NAMES as [PresetName, ...PresetName[]]), arg: '<name>', description: 'model size' }),
  seed: flagRow({ schema: int.min(0).max(2 ** 32 - 1), default: 0, description: 'PRNG seed for the initial weights' }),
  vocabSize: flagRow({ schema: int.min(8).max(1_000_000), description: "vocabulary size (default: the preset's; follows the tokenizer)" }),
  out: flagRow({ schema: z.string(), arg: '<dir>', description: 'output directory (created if missing)' }),
};

const LOSS_FLAGS = {
  model: flagRow({ schema: z.string(), arg: '<dir>', description: 'model directory with config.json and model.safetensors (any HF AlbertForPreTraining layout)' }),
  batch: flagRow({ schema: z.string(), arg: '<file>', description: 'JSON with input_ids, token_type_ids, attention_mask, labels (-100 = ignored), sentence_order_label as nested int arrays' }),
  grads: flagRow({ schema: z.string(), arg: '<file>', description: 'write ∂loss/∂param as safetensors under the parameter names' }),
  provider: flagRow({ schema: z.enum(PROVIDERS), default: 'auto', arg: '<name>', description: 'onnxruntime execution provider (auto: CUDA if it loads, else CPU; webgpu: a GPU through the WebGPU provider, fp32 only)' }),
  threads: flagRow({ schema: int.min(1).max(1024), description: 'onnxruntime intra-op threads (default: one per core)' }),
  precision: flagRow({ schema: z.enum(PRECISIONS), default: 'fp32', arg: '<name>', description: `compute precision ${PRECISION_NOTE}; with fp16 the output also has the loss_scale the gradients were computed at` }),
};

export function registerModel(program: Command): void {
  const model = program.command('model').description('create ALBERT checkpoints and evaluate them (HF-compatible config.json + model.safetensors)');

  const init = model
    .command('init')
    .description('write a randomly initialized AlbertForPreTraining (HF init: normal(0, 0.02), zero biases, LayerNorm 1/0) to DIR/config.json and DIR/model.safetensors');
  flagAction(init, INIT_FLAGS, async ({ seed, vocabSize, ...opts }, { log }) => {
    const preset = requiredFlag('--preset', opts.preset);
    const out = outputFlag('--out', requiredFlag('--out', opts.out), 'folder');
    const { checkConfig, initAlbertParams, saveModel } = await import('../../engine/index.js');
    const config = checkConfig({ ...PRESETS[preset], ...(vocabSize ? { vocabSize } : {}) });
    const params = initAlbertParams(config, seed);
    writeFolderWhole(out, (dir) => saveModel(dir, config, params));
    log.info({ preset, seed, parameters: params.size, out }, 'model written');
    process.stdout.write(JSON.stringify({ out, preset, parameters: params.size }) + '\n');
  });

  const exp = model
    .command('export')
    .description('write a checkpoint as a directory Hugging Face loads: config.json (AlbertConfig), model.safetensors (AlbertForPreTraining) and the run’s tokenizer.json (AutoTokenizer)')
    .option('--from <checkpoint>', 'latest (the newest model checkpoint in --data-dir’s store, a coordinator’s or a training session’s), an epoch (the newest checkpoint of it), or a model directory (a coordinator’s checkpoints/epoch-N)', 'latest')
    .option('--out <dir>', 'output directory (created if missing)')
    .option('--state', 'also the optimizer state and the epoch (optimizer.safetensors, cohort-state.json) of a full-state checkpoint: a directory `cohort run --resume-from` continues the run from');
  exp.action(async (opts: { from: string; out?: string; state?: boolean }) => {
    const { config, log } = commandContext(exp);
    const out = outputFlag('--out', requiredFlag('--out', opts.out), 'folder');
    const [{ openExistingStore }, { exportModel }] = await Promise.all([import('../../store/index.js'), import('../../training/model-export.js')]);
    let store: Store | undefined;
    try {
      const exported = exportModel(() => (store ??= openExistingStore(config.dataDir)), exportSource(opts.from), out, { onSkip: (message) => log.warn(message), withState: opts.state === true });
      log.info(exported, 'model exported');
      process.stdout.write(JSON.stringify(exported) + '\n');
    } finally {
      store?.close();
    }
  });

  const loss = model
    .command('loss')
    .description('one forward + backward pass: prints {"loss","mlm_loss","sop_loss","mlm_accuracy","sop_accuracy"} for a batch; --grads saves every parameter gradient');
  flagAction(loss, LOSS_FLAGS, async (opts, { log }) => {
    const { provider, threads, precision } = opts;
    checkProviderFlags(provider, precision);
    const dir = requiredFlag('--model', opts.model);
    const batchFile = requiredFlag('--batch', opts.batch);
    if (opts.grads !== undefined) outputFlag('--grads', opts.grads, 'file');
    const { loadModel, OrtBackend, DynamicLossScaler, encodeParams } = await import('../../engine/index.js');
    // a directory that cannot be loaded (no config.json, a bad file): the reason, naming --model
    let model: ReturnType<typeof loadModel>;
    try {
      model = loadModel(dir);
    } catch (err) {
      throw new CommandFailure(`--model: ${(err as Error).message}`, { cause: err });
    }
    const { config, params, ignored } = model;
    if (ignored.length > 0) log.debug({ ignored }, 'checkpoint keys not used (aliases and buffers)');
    const batch = readBatch(batchFile, config.vocabSize);
    const backend = new OrtBackend(config, { provider, intraOpThreads: threads, log, precision });
    // fp16: the largest loss scale from GradScaler's initial 2^16 down whose gradients are finite
    // (bounded: the scaler throws once the scale is too small for an overflow to be the cause)
    const scaler = precision === 'fp16' ? new DynamicLossScaler() : undefined;
    try {
      let r = await backend.forwardBackward(params, batch, undefined, { lossScale: scaler?.scale ?? 1 });
      let scale = scaler?.scale;
      while (scaler && !scaler.update(r.gradsFinite)) {
        scale = scaler.scale;
        r = await backend.forwardBackward(params, batch, r.grads, { lossScale: scale });
      }
      const grads = opts.grads;
      if (grads !== undefined) await writeFileWhole(grads, (partial) => fs.writeFileSync(partial, encodeParams(r.grads), { flag: 'wx', flush: true }));
      process.stdout.write(JSON.stringify({ loss: r.loss, mlm_loss: r.mlmLoss, sop_loss: r.sopLoss, mlm_accuracy: r.mlmAccuracy, sop_accuracy: r.sopAccuracy, ...(scale !== undefined ? { loss_scale: scale } : {}) }) + '\n');
    } finally {
      await backend.close();
    }
  });
}

/** --from as a model directory, `latest` or an epoch; anything else is a usage error. */
function exportSource(raw: string): ExportSource {
  if (fs.existsSync(raw) && fs.statSync(raw).isDirectory()) return { dir: raw };
  if (raw === 'latest') return {};
  if (!/^\d+$/.test(raw)) throw new ConfigError('--from', `invalid value ${JSON.stringify(raw)}; accepted: latest, an epoch (an integer ≥ 0) or a model directory`);
  return { epoch: parseFlagValue('--from', raw, int.min(0)) };
}

/** The --batch file as an AlbertBatch; unreadable or invalid content is a usage error naming the file. */
function readBatch(file: string, vocabSize: number) {
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError('--batch', `cannot read ${file} as JSON (${(err as Error).message})`);
  }
  try {
    return batchFromJson(json, vocabSize);
  } catch (err) {
    throw new ConfigError('--batch', `${file}: ${(err as Error).message}`);
  }
}
