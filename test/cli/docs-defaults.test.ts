// docs/collab.md's option table is checked against `cohort run` itself: every default it states for a
// flag is the default the flag has (which the optimizer's schema and DEFAULT_RUN_SETTINGS give it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { buildProgram } from '../../src/cli/program.js';

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
