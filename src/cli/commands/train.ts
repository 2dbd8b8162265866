import type { Command } from 'commander';
import { ConfigError } from '../../config/load.js';
import { z } from 'zod';
import { DEFAULT_RUN_SETTINGS } from '../../collab/run-settings.js';
import { PRESETS } from '../../engine/albert/config.js';
import type { LocalStep, OptimizerKind } from '../../engine/index.js';
import { DATA_CHOICES, DEFAULT_LOCAL_TRAINER, trainerSettings } from '../../training/options.js';
import { addSettingOptions, flagAction } from '../context.js';
import { flagRow, outputFlag, requiredFlag } from '../flag-table.js';
import { COMPUTE_FLAGS, RUN_SETTING_FLAGS } from '../run-flags.js';
import { checkProviderFlags, PROVIDERS } from './model.js';
import { writeFolderWhole } from '../../util/output-path.js';

const OPTIMIZERS = ['lamb', 'adamw'] as const satisfies readonly OptimizerKind[];
const int = z.number().int();

const TRAIN_FLAGS = {
  // the architecture only: unlike `cohort run`, no preset changes --seq-len, --lr or the schedule here
  preset: flagRow({ ...RUN_SETTING_FLAGS.preset, default: undefined, description: 'model size (the architecture only; --seq-len, --lr and --warmup-steps keep their defaults)' }),
  steps: flagRow({ schema: int.min(1).max(10_000_000), description: 'training steps to take (an fp16 step skipped for overflow counts as one)' }),
  ...COMPUTE_FLAGS,
  seqLen: RUN_SETTING_FLAGS.seqLen,
  peakLr: RUN_SETTING_FLAGS.peakLr,
  warmupSteps: flagRow({ schema: RUN_SETTING_FLAGS.warmupSteps.schema, description: 'linear warmup steps before linear decay to 0 at --steps (default 10% of --steps)' }),
  optimizer: flagRow({ schema: z.enum(OPTIMIZERS), default: 'lamb', arg: '<name>', description: 'the optimizer' }),
  maxGradNorm: RUN_SETTING_FLAGS.maxGradNorm,
  maxBadSteps: flagRow({ schema: int.min(1).max(1_000_000), default: DEFAULT_LOCAL_TRAINER.maxBadSteps, description: 'stop after N steps in a row with a non-finite loss or gradient (each is skipped)' }),
  seed: flagRow({ ...RUN_SETTING_FLAGS.seed, description: 'seed for the initial weights and the synthetic data' }),
  vocabSize: flagRow({ schema: int.min(8).max(1_000_000), description: "vocabulary size (default: the preset's)" }),
  provider: flagRow({ schema: z.enum(PROVIDERS), default: 'auto', arg: '<name>', description: 'onnxruntime execution provider' }),
  out: flagRow({ schema: z.string(), arg: '<dir>', description: 'save the trained model here (config.json + model.safetensors)' }),
  data: flagRow({ schema: z.enum(DATA_CHOICES), default: 'auto', arg: '<source>', description: 'batches from (auto: the prepared dataset if there is one, else synthetic random tokens)' }),
};

export function registerTrain(program: Command): void {
  const cmd = program
    .command('train')
    .description('train ALBERT on this machine alone (no swarm) on the prepared dataset in the data directory (see `cohort data prepare`); prints progress and a final JSON line');
  addSettingOptions(cmd, ['moveAside']);
  flagAction(cmd, TRAIN_FLAGS, async (opts, { config: settings, log }) => {
    const preset = requiredFlag('--preset', opts.preset);
    const steps = requiredFlag('--steps', opts.steps);
    // written when training ends: a place it cannot go exits here, not after the training
    if (opts.out !== undefined) outputFlag('--out', opts.out, 'folder');
    const { batchSize, vocabSize, data: dataChoice, seqLen, peakLr, optimizer: kind, maxGradNorm, maxBadSteps, seed, provider, threads, precision } = opts;
    checkProviderFlags(provider, precision);
    const maxPositions = PRESETS[preset].maxPositionEmbeddings;
    if (seqLen > maxPositions) throw new ConfigError('--seq-len', `${seqLen} exceeds the ${preset} preset's ${maxPositions} positions`);
    const warmupSteps = opts.warmupSteps ?? Math.floor(steps / 10);
    if (warmupSteps >= steps) throw new ConfigError('--warmup-steps', `${warmupSteps} is not an integer from 0 to ${steps - 1} (less than --steps ${steps})`);
    const [{ nodeStoreOptions, openStore }, { openTrainingSession }, { VocabularyMismatchError }, { linearWarmupDecay, saveModel }] = await Promise.all([
      import('../../store/index.js'),
      import('../../training/session.js'),
      import('../../training/data.js'),
      import('../../engine/index.js'),
    ]);

    const store = openStore(settings.dataDir, nodeStoreOptions(settings.moveAside, log));
    let session;
    try {
      const trainer = trainerSettings({ ...DEFAULT_RUN_SETTINGS, preset, seqLen, seed, peakLr, warmupSteps, totalSteps: steps + 1, maxGradNorm }, { batchSize, precision, maxBadSteps });
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
        last = await session.localStep(await data.next(), lr);
        if (last.skipped === 'overflow') log.debug({ step: step + 1, lossScale: session.scaler!.scale }, 'fp16 gradients overflowed: step skipped, loss scale backed off');
        const elapsed = (performance.now() - started) / 1000;
        process.stderr.write(progressBar(step + 1, steps, elapsed, last.loss, last.mlmLoss, last.sopLoss, lr) + (process.stderr.isTTY ? '\r' : '\n'));
      }
    } finally {
      await session.close();
      store.close();
    }
    if (process.stderr.isTTY) process.stderr.write('\n');
    const out = opts.out;
    if (out !== undefined) writeFolderWhole(out, (dir) => saveModel(dir, config, params));
    const seconds = (performance.now() - started) / 1000;
    if (!last) throw new Error('no training step was taken');
    process.stdout.write(JSON.stringify({ steps, loss: last.loss, mlm_loss: last.mlmLoss, sop_loss: last.sopLoss, mlm_accuracy: last.mlmAccuracy, sop_accuracy: last.sopAccuracy, seconds, samples_per_s: (steps * batchSize) / seconds, data: data.kind, precision, bad_steps: session.badSteps, ...(session.scaler ? { skipped_steps: session.scaler.skippedSteps, loss_scale: session.scaler.scale } : {}) }) + '\n');
  });
}

/** `[#####-----] 50/100 loss 7.012 (mlm 6.321 sop 0.691) lr 1.2e-3 0.84 s/step` */
export function progressBar(step: number, total: number, seconds: number, loss: number, mlm: number, sop: number, lr: number): string {
  const width = 20;
  const done = Math.round((step / total) * width);
  return `[${'#'.repeat(done)}${'-'.repeat(width - done)}] ${step}/${total} loss ${loss.toFixed(3)} (mlm ${mlm.toFixed(3)} sop ${sop.toFixed(3)}) lr ${lr.toExponential(2)} ${(seconds / step).toFixed(2)} s/step`;
}
