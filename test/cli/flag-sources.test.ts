// Every flag of `cohort run` and `cohort swarm start` has a COHORT_* variable and a config-file key,
// with the settings' precedence: flag > variable > config file > default. One table: every option.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/program.js';
import { commandContext } from '../../src/cli/context.js';
import { SETTINGS } from '../../src/config/settings.js';
import { runCli } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

/** A fresh `cohort <path>` command with `args` parsed, its action not run. */
function parsed(names: readonly string[], args: readonly string[]): Command {
  let cmd = buildProgram();
  for (const name of names) cmd = cmd.commands.find((c) => c.name() === name)!;
  cmd.parseOptions([...args]);
  return cmd;
}

const COMMANDS = [['run'], ['swarm', 'start']] as const;
const envOf = (key: string): string => 'COHORT_' + key.replace(/[A-Z]/g, (c) => '_' + c).toUpperCase();

for (const names of COMMANDS) {
  const options = parsed(names, []).options.filter((o) => !(o.attributeName() in SETTINGS));
  test(`cohort ${names.join(' ')}: each of its ${options.length} own flags reads its COHORT_* variable and config-file key, flag > variable > file`, (t) => {
    assert.ok(options.length >= (names[0] === 'run' ? 30 : 5), 'the table covers the command');
    const dir = tmpDir(t);
    for (const option of options) {
      const key = option.attributeName();
      const flag = option.long!;
      const [fileValue, envValue, flagArgs, flagValue] = option.isBoolean() ? [true, 'false', [flag], true] : ['from-file', 'from-env', [flag, 'from-flag'], 'from-flag'];
      const file = path.join(dir, `${key}.json`);
      fs.writeFileSync(file, JSON.stringify({ [key]: fileValue, dataDir: dir }));
      const fromFile = parsed(names, []);
      commandContext(fromFile, { COHORT_CONFIG: file });
      assert.deepEqual([fromFile.getOptionValue(key), fromFile.getOptionValueSource(key)], [fileValue, 'config'], `${flag} from the config file`);
      const fromEnv = parsed(names, []);
      commandContext(fromEnv, { COHORT_CONFIG: file, [envOf(key)]: envValue });
      assert.deepEqual([fromEnv.getOptionValue(key), fromEnv.getOptionValueSource(key)], [option.isBoolean() ? false : envValue, 'env'], `${envOf(key)} beats the file`);
      const fromFlag = parsed(names, flagArgs);
      commandContext(fromFlag, { COHORT_CONFIG: file, [envOf(key)]: envValue });
      assert.deepEqual([fromFlag.getOptionValue(key), fromFlag.getOptionValueSource(key)], [flagValue, 'cli'], `${flag} beats ${envOf(key)}`);
      assert.match(option.description, new RegExp(`\\(env ${envOf(key)}\\)`), `--help names ${envOf(key)}`);
    }
  });
}

test('a bad value from a variable or the config file names where it came from; an unknown file key is an error', async (t) => {
  const dir = tmpDir(t);
  const env = await runCli(['run', '--data-dir', dir], { env: { COHORT_TARGET_BATCH_SIZE: 'abc' } });
  assert.equal(env.code, 2);
  assert.match(env.stderr, /COHORT_TARGET_BATCH_SIZE \(--target-batch-size: invalid value "abc"/);
  const file = path.join(dir, 'c.json');
  fs.writeFileSync(file, JSON.stringify({ useLocalUpdates: 'maybe' }));
  const bad = await runCli(['run', '--data-dir', dir, '--config', file]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /config file .*"useLocalUpdates": invalid value "maybe"; accepted: true or false/);
  fs.writeFileSync(file, JSON.stringify({ targetBatchSise: 64 }));
  const unknown = await runCli(['swarm', 'start', '--data-dir', dir, '--config', file]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown setting\(s\) "targetBatchSise"/);
});
