// `cohort run`'s run-wide flags as parsed (the action not run): omitted ones take the preset's
// defaults, given ones win, and a recipe value out of its schema's range exits 2 naming its flag.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_RUN_SETTINGS } from '../../src/collab/index.js';
import { buildProgram } from '../../src/cli/program.js';
import { parseFlags } from '../../src/cli/flag-table.js';
import { RUN_FLAGS, runSettingFlags } from '../../src/cli/run-flags.js';

function flags(args: readonly string[]): ReturnType<typeof runSettingFlags> {
  const run = buildProgram().commands.find((c) => c.name() === 'run')!;
  run.parseOptions([...args]);
  return runSettingFlags(run, parseFlags(run, RUN_FLAGS));
}

test('cohort run --preset large runs hivemind’s ALBERT recipe where a flag is omitted; a given flag wins', () => {
  const { settings, explicit } = flags(['--preset', 'large', '--lr', '0.01', '--clamp-value', '10']);
  assert.deepEqual(
    [settings.seqLen, settings.targetBatchSize, settings.warmupSteps, settings.totalSteps, settings.gradCompression, settings.stateAveragingCompression, settings.adamBeta1, settings.adamBeta2, settings.adamEpsilon, settings.weightDecay, settings.maxGradNorm],
    [512, 4096, 5000, 125_000, 'fp16', 'fp16', 0.9, 0.999, 1e-6, 0.01, 1],
  );
  assert.equal(settings.peakLr, 0.01);
  assert.equal(settings.clampValue, 10);
  assert.deepEqual([...explicit].sort(), ['clampValue', 'peakLr', 'preset']);
  assert.deepEqual(flags([]).settings, DEFAULT_RUN_SETTINGS, 'without flags: the defaults a founder publishes');
  assert.equal(flags(['--weight-decay', '0']).settings.weightDecay, 0, 'no weight decay is a recipe too');
});

test('a LAMB recipe value out of its range exits 2 naming the flag', () => {
  for (const [args, flag] of [
    [['--adam-beta1', '1'], '--adam-beta1'],
    [['--adam-beta2', '1.5'], '--adam-beta2'],
    [['--weight-decay', '2'], '--weight-decay'],
    [['--adam-epsilon', '3'], '--adam-epsilon'],
  ] as const) {
    assert.throws(() => flags(args), (err: Error) => err.message.startsWith(`${flag}: invalid value`), args.join(' '));
  }
  assert.throws(() => flags(['--clamp-value', '-1']), /--clamp-value/);
});
