import fs from 'node:fs';
import type { Command } from 'commander';
import { checkConfig, PRESET_NAMES, PRESETS, type PresetName } from '../../engine/albert/config.js';
import { encodeParams, loadModel, saveModel } from '../../engine/albert/checkpoint.js';
import { initAlbertParams } from '../../engine/albert/params.js';
import { batchFromJson } from '../../engine/batch.js';
import { OrtBackend, type ProviderChoice } from '../../engine/ort-backend.js';
import { ConfigError } from '../../config/load.js';
import { commandContext } from '../context.js';
import { choiceFlag, intFlag, requiredFlag } from '../flags.js';

export const PROVIDERS: readonly ProviderChoice[] = ['auto', 'cpu', 'cuda'];

export function registerModel(program: Command): void {
  const model = program.command('model').description('create ALBERT checkpoints and evaluate them (HF-compatible config.json + model.safetensors)');

  const init = model
    .command('init')
    .description('write a randomly initialized AlbertForPreTraining (HF init: normal(0, 0.02), zero biases, LayerNorm 1/0) to DIR/config.json and DIR/model.safetensors')
    .option('--preset <name>', `model size; accepted: ${PRESET_NAMES.join(', ')}`)
    .option('--seed <n>', 'PRNG seed for the initial weights (default 0)')
    .option('--vocab-size <n>', "vocabulary size (default: the preset's; follows the tokenizer)")
    .option('--out <dir>', 'output directory (created if missing)');
  init.action((opts: { preset?: string; seed?: string; vocabSize?: string; out?: string }) => {
    const { log } = commandContext(init);
    const preset = requiredFlag('--preset', choiceFlag<PresetName>('--preset', opts.preset, PRESET_NAMES));
    const seed = intFlag('--seed', opts.seed, 0, 2 ** 32 - 1) ?? 0;
    const vocabSize = intFlag('--vocab-size', opts.vocabSize, 8, 1_000_000);
    const out = requiredFlag('--out', opts.out);
    const config = checkConfig({ ...PRESETS[preset], ...(vocabSize ? { vocabSize } : {}) });
    const params = initAlbertParams(config, seed);
    saveModel(out, config, params);
    log.info({ preset, seed, parameters: params.size, out }, 'model written');
    process.stdout.write(JSON.stringify({ out, preset, parameters: params.size }) + '\n');
  });

  const loss = model
    .command('loss')
    .description('one forward + backward pass: prints {"loss","mlm_loss","sop_loss","mlm_accuracy","sop_accuracy"} for a batch; --grads saves every parameter gradient')
    .option('--model <dir>', 'model directory with config.json and model.safetensors (any HF AlbertForPreTraining layout)')
    .option('--batch <file>', 'JSON with input_ids, token_type_ids, attention_mask, labels (-100 = ignored), sentence_order_label as nested int arrays')
    .option('--grads <file>', 'write ∂loss/∂param as safetensors under the parameter names')
    .option('--provider <name>', `onnxruntime execution provider; accepted: ${PROVIDERS.join(', ')} (default auto: CUDA if it loads, else CPU)`)
    .option('--threads <n>', 'onnxruntime intra-op threads (default: one per core)');
  loss.action(async (opts: { model?: string; batch?: string; grads?: string; provider?: string; threads?: string }) => {
    const { log } = commandContext(loss);
    const dir = requiredFlag('--model', opts.model);
    const batchFile = requiredFlag('--batch', opts.batch);
    const provider = choiceFlag('--provider', opts.provider, PROVIDERS) ?? 'auto';
    const threads = intFlag('--threads', opts.threads, 1, 1024);
    const { config, params, ignored } = loadModel(dir);
    if (ignored.length > 0) log.debug({ ignored }, 'checkpoint keys not used (aliases and buffers)');
    const batch = readBatch(batchFile, config.vocabSize);
    const backend = new OrtBackend(config, { provider, intraOpThreads: threads, log });
    try {
      const r = await backend.forwardBackward(params, batch);
      if (opts.grads) fs.writeFileSync(opts.grads, encodeParams(r.grads));
      process.stdout.write(JSON.stringify({ loss: r.loss, mlm_loss: r.mlmLoss, sop_loss: r.sopLoss, mlm_accuracy: r.mlmAccuracy, sop_accuracy: r.sopAccuracy }) + '\n');
    } finally {
      await backend.close();
    }
  });
}

/** The --batch file as an AlbertBatch; unreadable or invalid content is a usage error naming the file. */
function readBatch(file: string, vocabSize: number) {
  let problem: string | undefined;
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    problem = (err as Error).message;
  }
  if (problem !== undefined) throw new ConfigError('--batch', `cannot read ${file} as JSON (${problem})`);
  try {
    return batchFromJson(json, vocabSize);
  } catch (err) {
    problem = (err as Error).message;
  }
  throw new ConfigError('--batch', `${file}: ${problem}`);
}
