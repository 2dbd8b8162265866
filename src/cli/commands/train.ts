import type { Command } from 'commander';
import { ConfigError } from '../../config/load.js';
import { linearWarmupDecay, type LocalStep, PRESET_NAMES, PRESETS, saveModel, trainStep, type OptimizerKind, type PresetName } from '../../engine/index.js';
import { openStore } from '../../store/index.js';
import { DATA_CHOICES, VocabularyMismatchError } from '../../training/data.js';
import { DEFAULT_RUN_SETTINGS } from '../../collab/index.js';
import { DEFAULT_LOCAL_TRAINER, trainerSettings } from '../../training/options.js';
import { openTrainingSession } from '../../training/session.js';
import { commandContext } from '../context.js';
import { choiceFlag, intFlag, positiveFloatFlag, requiredFlag } from '../flags.js';
import { PRECISION_HELP, precisionFlag, PROVIDERS } from './model.js';

const OPTIMIZERS: readonly OptimizerKind[] = ['lamb', 'adamw'];

interface TrainOptions {
  preset?: string;
  steps?: string;
  batchSize?: string;
  seqLen?: string;
  lr?: string;
  warmupSteps?: string;
  optimizer?: string;
  maxGradNorm?: string;
  seed?: string;
  vocabSize?: string;
  provider?: string;
  threads?: string;
  out?: string;
  data?: string;
  precision?: string;
}

export function registerTrain(program: Command): void {
  const cmd = program
    .command('train')
    .description('train ALBERT on this machine alone (no swarm) on the prepared dataset in the data directory (see `cohort data prepare`); prints progress and a final JSON line')
    .option('--preset <name>', `model size; accepted: ${PRESET_NAMES.join(', ')}`)
    .option('--steps <n>', 'training steps to take (an fp16 step skipped for overflow counts as one)')
    .option('--batch-size <n>', `sequences per step (default ${DEFAULT_LOCAL_TRAINER.batchSize})`)
    .option('--seq-len <n>', 'tokens per sequence (default 128)')
    .option('--lr <x>', `peak learning rate (default ${DEFAULT_RUN_SETTINGS.peakLr})`)
    .option('--warmup-steps <n>', 'linear warmup steps before linear decay to 0 at --steps (default 10% of --steps)')
    .option('--optimizer <name>', `accepted: ${OPTIMIZERS.join(', ')} (default lamb)`)
    .option('--max-grad-norm <x>', `global gradient-norm clip (default ${DEFAULT_RUN_SETTINGS.maxGradNorm})`)
    .option('--seed <n>', 'seed for the initial weights and the synthetic data (default 0)')
    .option('--vocab-size <n>', "vocabulary size (default: the preset's)")
    .option('--provider <name>', `onnxruntime execution provider; accepted: ${PROVIDERS.join(', ')} (default auto)`)
    .option('--threads <n>', 'onnxruntime intra-op threads (default: one per core)')
    .option('--precision <name>', `${PRECISION_HELP}; a step whose fp16 gradients overflow is skipped`)
    .option('--out <dir>', 'save the trained model here (config.json + model.safetensors)')
    .option('--data <source>', `batches from: ${DATA_CHOICES.join(', ')} (default auto: the prepared dataset if there is one, else synthetic random tokens)`);
  cmd.action(async (opts: TrainOptions) => {
    const { config: settings, log } = commandContext(cmd);
    const preset = requiredFlag('--preset', choiceFlag<PresetName>('--preset', opts.preset, PRESET_NAMES));
    const steps = requiredFlag('--steps', intFlag('--steps', opts.steps, 1, 10_000_000));
    const batchSize = intFlag('--batch-size', opts.batchSize, 1, 4096) ?? DEFAULT_LOCAL_TRAINER.batchSize;
    const vocabSize = intFlag('--vocab-size', opts.vocabSize, 8, 1_000_000);
    const dataChoice = choiceFlag('--data', opts.data, DATA_CHOICES) ?? 'auto';
    const maxPositions = PRESETS[preset].maxPositionEmbeddings;
    const seqLen = intFlag('--seq-len', opts.seqLen, 5, maxPositions) ?? Math.min(128, maxPositions);
    const peakLr = positiveFloatFlag('--lr', opts.lr) ?? DEFAULT_RUN_SETTINGS.peakLr;
    const warmupSteps = intFlag('--warmup-steps', opts.warmupSteps, 0, steps - 1) ?? Math.floor(steps / 10);
    const kind = choiceFlag('--optimizer', opts.optimizer, OPTIMIZERS) ?? 'lamb';
    const maxGradNorm = positiveFloatFlag('--max-grad-norm', opts.maxGradNorm) ?? DEFAULT_RUN_SETTINGS.maxGradNorm;
    const seed = intFlag('--seed', opts.seed, 0, 2 ** 32 - 1) ?? 0;
    const provider = choiceFlag('--provider', opts.provider, PROVIDERS) ?? 'auto';
    const threads = intFlag('--threads', opts.threads, 1, 1024);
    const precision = precisionFlag(opts.precision);

    const store = openStore(settings.dataDir, { moveAside: settings.moveAside });
    let session;
    try {
      const trainer = trainerSettings({ ...DEFAULT_RUN_SETTINGS, preset, seqLen, seed, peakLr, warmupSteps, totalSteps: steps + 1, maxGradNorm }, { batchSize, precision });
      session = await openTrainingSession({ store, log, trainer, provider, threads, optimizer: kind, data: dataChoice, dataPeerId: 'local', vocabSize, onWarning: (m) => log.warn(m) });
    } catch (err) {
      store.close();
      if (err instanceof VocabularyMismatchError) throw new ConfigError('--vocab-size', `${err.asked} differs from the prepared dataset's tokenizer (${err.prepared}); omit it or pass --data synthetic`);
      throw err;
    }
    const { config, params, data } = session;
    if (data.kind === 'synthetic') log.warn(`training on ${data.description}`);
    else log.info(`training on ${data.description}`);
    log.info({ preset, parameters: params.size, batchSize, seqLen, steps, optimizer: kind, peakLr, warmupSteps, precision }, 'training');
    const started = performance.now();
    let last: LocalStep | undefined;
    try {
      for (let step = 0; step < steps; step++) {
        const lr = linearWarmupDecay(step + 1, { peakLr, warmupSteps, totalSteps: steps + 1 });
        last = await trainStep(session.backend, session.optimizer, params, session.grads, await data.next(), lr, maxGradNorm, session.scaler);
        if (last.skipped) log.debug({ step: step + 1, lossScale: session.scaler!.scale }, 'fp16 gradients overflowed: step skipped, loss scale backed off');
        const elapsed = (performance.now() - started) / 1000;
        process.stderr.write(progressBar(step + 1, steps, elapsed, last.loss, last.mlmLoss, last.sopLoss, lr) + (process.stderr.isTTY ? '\r' : '\n'));
      }
    } finally {
      await session.close();
      store.close();
    }
    if (process.stderr.isTTY) process.stderr.write('\n');
    if (opts.out) saveModel(opts.out, config, params);
    const seconds = (performance.now() - started) / 1000;
    if (!last) throw new Error('no training step was taken');
    process.stdout.write(JSON.stringify({ steps, loss: last.loss, mlm_loss: last.mlmLoss, sop_loss: last.sopLoss, mlm_accuracy: last.mlmAccuracy, sop_accuracy: last.sopAccuracy, seconds, samples_per_s: (steps * batchSize) / seconds, data: data.kind, precision, ...(session.scaler ? { skipped_steps: session.scaler.skippedSteps, loss_scale: session.scaler.scale } : {}) }) + '\n');
  });
}

/** `[#####-----] 50/100 loss 7.012 (mlm 6.321 sop 0.691) lr 1.2e-3 0.84 s/step` */
export function progressBar(step: number, total: number, seconds: number, loss: number, mlm: number, sop: number, lr: number): string {
  const width = 20;
  const done = Math.round((step / total) * width);
  return `[${'#'.repeat(done)}${'-'.repeat(width - done)}] ${step}/${total} loss ${loss.toFixed(3)} (mlm ${mlm.toFixed(3)} sop ${sop.toFixed(3)}) lr ${lr.toExponential(2)} ${(seconds / step).toFixed(2)} s/step`;
}
