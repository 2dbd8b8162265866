// `cohort run`'s flags are rows over the schemas that own the values: what a flag accepts, refuses and
// defaults to is what the run record's and the optimizer's schemas say.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { COLLABORATIVE_OPTION_FIELDS, DEFAULT_RUN_SETTINGS, resolveCollaborativeOptions } from '../../src/collab/index.js';
import { ConfigError } from '../../src/config/load.js';
import { buildProgram } from '../../src/cli/program.js';
import { acceptedOf, parseFlags } from '../../src/cli/flag-table.js';
import { checkRunSettings, RUN_FLAGS, runSettingFlags } from '../../src/cli/run-flags.js';
import { z } from 'zod';

function run(args: readonly string[]) {
  const cmd = buildProgram().commands.find((c) => c.name() === 'run')!;
  cmd.parseOptions([...args]);
  return { cmd, flags: parseFlags(cmd, RUN_FLAGS) };
}

test('omitted flags take the run record’s defaults and the optimizer schema’s; none counts as given', () => {
  const { cmd, flags } = run([]);
  assert.deepEqual(runSettingFlags(cmd, flags), { settings: DEFAULT_RUN_SETTINGS, explicit: [] });
  const optimizer = resolveCollaborativeOptions({ ...DEFAULT_RUN_SETTINGS });
  assert.deepEqual([flags.matchmakingTime, flags.averagingTimeout, flags.targetGroupSize, flags.delayGradAveraging], [optimizer.matchmakingTime, optimizer.averagingTimeout, optimizer.targetGroupSize, optimizer.delayGradAveraging]);
  assert.equal(flags.averagingExpiration, undefined, 'its default depends on --matchmaking-time, so the optimizer decides it');
});

test('given flags are parsed by their schema and reported as given', () => {
  const { cmd, flags } = run(['--lr', '0.01', '--preset', 'base', '--use-local-updates', '--target-group-size', '8', '--upload-limit', '64']);
  const { settings, explicit } = runSettingFlags(cmd, flags);
  assert.deepEqual([settings.peakLr, settings.preset, settings.useLocalUpdates, flags.targetGroupSize, flags.uploadLimit], [0.01, 'base', true, 8, 64]);
  assert.deepEqual([...explicit].sort(), ['peakLr', 'preset', 'useLocalUpdates']);
});

test('a value the owning schema refuses is a ConfigError naming the flag and what the schema accepts', () => {
  const refused: Array<[string[], RegExp]> = [
    [['--target-group-size', '257'], /^--target-group-size: invalid value "257"; accepted: an integer from 1 to 256$/],
    [['--matchmaking-time', '0'], /^--matchmaking-time: invalid value "0"; accepted: a number > 0$/],
    [['--seed', '1.5'], /^--seed: invalid value "1.5"; accepted: an integer from 0 to 4294967295$/],
    [['--grad-compression', 'zip'], /^--grad-compression: invalid value "zip"; accepted: none, fp16, uniform8, blockwise8, blockwise4$/],
    [['--display-name', ''], /^--display-name: invalid value ""; accepted: 1–64 characters$/],
    [['--batch-size', '12abc'], /^--batch-size: invalid value "12abc"/],
  ];
  for (const [args, message] of refused) assert.throws(() => run(args), (err: unknown) => err instanceof ConfigError && message.test(err.message), args.join(' '));
  assert.equal(acceptedOf(COLLABORATIVE_OPTION_FIELDS.targetGroupSize), 'an integer from 1 to 256');
  assert.equal(acceptedOf(z.number().min(0).max(1)), 'a number from 0 to 1');
});

test('DiLoCo: its flags are run settings; a combination it cannot train with is refused naming the flag, and by the optimizer naming the option', () => {
  const { cmd, flags } = run(['--outer-optimizer', 'diloco', '--inner-steps', '5', '--inner-batch-size', '64', '--outer-lr', '0.5', '--outer-momentum', '0', '--outer-overlap']);
  const { settings, explicit } = runSettingFlags(cmd, flags);
  assert.deepEqual([settings.outerOptimizer, settings.innerSteps, settings.innerBatchSize, settings.outerLr, settings.outerMomentum, settings.outerOverlap], ['diloco', 5, 64, 0.5, 0, true]);
  assert.deepEqual([...explicit].sort(), ['innerBatchSize', 'innerSteps', 'outerLr', 'outerMomentum', 'outerOptimizer', 'outerOverlap']);
  const local = { delayGradAveraging: false, delayOptimizerStep: false };
  checkRunSettings(settings, local);
  const refused: Array<[() => void, RegExp]> = [
    [() => checkRunSettings({ ...settings, useLocalUpdates: true }, local), /^--use-local-updates: true: diloco takes its own local steps/],
    [() => checkRunSettings({ ...settings, gradAverager: 'powersgd' }, local), /^--grad-averager: powersgd: diloco averages/],
    [() => checkRunSettings(settings, { ...local, delayOptimizerStep: true }), /^--delay-optimizer-step: is not supported with --outer-optimizer diloco/],
    [() => run(['--inner-steps', '0']), /^--inner-steps: invalid value "0"/],
    [() => run(['--inner-batch-size', '0']), /^--inner-batch-size: invalid value "0"/],
    [() => checkRunSettings({ ...settings, outerOptimizer: 'none', outerOverlap: false }, local), /^--inner-batch-size: 64: it sets DiLoCo's inner steps \(it needs --outer-optimizer diloco, not none\)$/],
    [() => run(['--outer-optimizer', 'adam']), /^--outer-optimizer: invalid value "adam"; accepted: none, diloco$/],
    [() => checkRunSettings({ ...settings, outerOptimizer: 'none' }, local), /^--outer-overlap: true: the overlap delays DiLoCo's outer step \(it needs --outer-optimizer diloco, not none\)$/],
  ];
  for (const [f, message] of refused) assert.throws(f, (err: unknown) => err instanceof ConfigError && message.test(err.message), String(message));
  assert.throws(() => resolveCollaborativeOptions({ ...settings, gradAverager: 'powersgd' }), /^RangeError: outer_optimizer diloco averages its pseudo-gradient as it is: grad_averager must be plain, not powersgd$/);
  assert.throws(() => resolveCollaborativeOptions({ ...settings, delayGradAveraging: true }), /delay_optimizer_step and delay_grad_averaging are not supported with outer_optimizer diloco/);
  assert.throws(() => resolveCollaborativeOptions({ ...settings, outerOptimizer: 'none', outerOverlap: false }), /^RangeError: inner_batch_size sets DiLoCo's inner steps: it needs outer_optimizer diloco, not none$/);
  assert.throws(() => resolveCollaborativeOptions({ ...settings, outerOptimizer: 'none' }), /^RangeError: outer_overlap delays DiLoCo's outer step: it needs outer_optimizer diloco, not none$/);
});

test('a founder’s flag that tunes PowerSGD or DiLoCo without choosing it, or PowerSGD with local updates, is refused naming the flags (it would train without the mode); with the mode it is accepted', () => {
  const local = { delayGradAveraging: false, delayOptimizerStep: false };
  const check = (args: string[]): void => {
    const { cmd, flags } = run(args);
    const { settings, explicit } = runSettingFlags(cmd, flags);
    checkRunSettings(settings, local, explicit);
  };
  const refused: Array<[string[], RegExp]> = [
    [['--powersgd-rank', '8'], /^--powersgd-rank: 8: it tunes PowerSGD \(it needs --grad-averager powersgd, not plain\)$/],
    [['--grad-averager', 'plain', '--powersgd-min-ratio', '0.2'], /^--powersgd-min-ratio: 0.2: it tunes PowerSGD \(it needs --grad-averager powersgd, not plain\)$/],
    [['--inner-steps', '10'], /^--inner-steps: 10: it tunes DiLoCo \(it needs --outer-optimizer diloco, not none\)$/],
    [['--outer-lr', '0.5'], /^--outer-lr: 0.5: it tunes DiLoCo/],
    [['--outer-momentum', '0'], /^--outer-momentum: 0: it tunes DiLoCo/],
    [['--grad-averager', 'powersgd', '--use-local-updates'], /^--grad-averager: powersgd: it compresses the gradient all-reduce, which --use-local-updates turns off$/],
  ];
  for (const [args, message] of refused) assert.throws(() => check(args), (err: unknown) => err instanceof ConfigError && message.test(err.message), args.join(' '));
  check(['--grad-averager', 'powersgd', '--powersgd-rank', '8', '--powersgd-min-ratio', '0.2']);
  check(['--outer-optimizer', 'diloco', '--inner-steps', '10', '--outer-lr', '0.5', '--outer-momentum', '0']);
});
