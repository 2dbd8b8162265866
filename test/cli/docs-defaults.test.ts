// docs/collab.md's option table is checked against `cohort run` itself: every default it states for a
// flag is the default the flag has (which the optimizer's schema and DEFAULT_RUN_SETTINGS give it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/program.js';
import { envName, flagName, SETTINGS } from '../../src/config/settings.js';

test('docs/collab.md states the defaults cohort run has', () => {
  const run = buildProgram().commands.find((c) => c.name() === 'run')!;
  const rows = fs
    .readFileSync('docs/collab.md', 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('| '))
    .map((line) => line.split('|').map((cell) => cell.trim()))
    .filter((cells) => cells.length >= 6); // the four-column option tables
  let checked = 0;
  for (const [, , flagCell, defaultCell] of rows) {
    const flags = [...(flagCell ?? '').matchAll(/`(--[a-z-]+)`/g)].map((m) => m[1]!);
    const defaults = (defaultCell ?? '').split(', ');
    if (flags.length === 0 || flags.length !== defaults.length) continue;
    flags.forEach((flag, i) => {
      const option = run.options.find((o) => o.long === flag);
      if (option?.defaultValue === undefined) return;
      const stated = defaults[i]!.replace(/ s$/, '');
      assert.equal(stated, String(option.defaultValue), `docs/collab.md: ${flag} defaults to ${String(option.defaultValue)}, not ${defaults[i]}`);
      checked++;
    });
  }
  assert.ok(checked >= 12, `only ${checked} defaults were checked: is the table still there?`);
});

/** Every command under `program`, subcommands included, with its full name (`data prepare`). */
function commandsOf(cmd: Command, prefix = ''): { name: string; cmd: Command }[] {
  return cmd.commands.flatMap((sub) => {
    const name = `${prefix}${sub.name()}`;
    return [{ name, cmd: sub }, ...commandsOf(sub, `${name} `)];
  });
}

const userDocs = () => ['README.md', ...fs.readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)].map((f) => fs.readFileSync(f, 'utf8')).join('\n');

test('every flag of every command is named in README.md or docs/', () => {
  const docs = userDocs();
  const program = buildProgram();
  const missing: string[] = [];
  for (const { name, cmd } of [{ name: '(global)', cmd: program }, ...commandsOf(program)]) {
    for (const option of cmd.options) {
      const flag = option.long!;
      if (flag === '--version') continue;
      if (!new RegExp(`${flag}(?![a-z-])`).test(docs)) missing.push(`cohort ${name} ${flag}`);
    }
  }
  assert.deepEqual(missing, [], 'flags no doc names');
});

test("README.md's configuration table has a row for every global setting", () => {
  const readme = fs.readFileSync('README.md', 'utf8');
  const rows = readme.split('\n').filter((line) => line.startsWith('| ') && line.includes('`COHORT_'));
  const missing = Object.keys(SETTINGS).filter((key) => !rows.some((row) => row.includes(`\`${flagName(key)}\``) && row.includes(`\`${envName(key)}\``)));
  assert.deepEqual(missing, [], 'settings without a row (flag and variable) in README.md');
});

test("cohort train's --preset help promises only what train does with it", () => {
  const train = buildProgram().commands.find((c) => c.name() === 'train')!;
  const preset = train.options.find((o) => o.long === '--preset')!;
  const seqLen = train.options.find((o) => o.long === '--seq-len')!;
  // `cohort train --preset large` keeps --seq-len's own default: its help must not name run's recipe (sequence 512)
  assert.equal(seqLen.defaultValue, 128);
  assert.doesNotMatch(preset.description, /recipe|sequence 512/);
});
