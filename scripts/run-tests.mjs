// Runs every test/**/*.test.ts with node's test runner through tsx. Extra arguments are passed on
// (e.g. `npm run test:unit -- --test-name-pattern store`); file arguments narrow the run.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const fileArgs = args.filter((a) => a.endsWith('.ts'));
const flagArgs = args.filter((a) => !a.endsWith('.ts'));

function find(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' ? [] : find(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

const files = fileArgs.length > 0 ? fileArgs : find('test').sort();
// A test that hangs fails after TEST_TIMEOUT_MS instead of stalling the whole run (and CI). The runner
// applies it to each file as a whole, so files that install a whole package (*.slow.test.ts) run
// afterwards with SLOW_TIMEOUT_MS.
const TEST_TIMEOUT_MS = 240_000;
const SLOW_TIMEOUT_MS = 900_000;
const isSlow = (f) => f.endsWith('.slow.test.ts');
let status = 0;
for (const [group, timeout] of [
  [files.filter((f) => !isSlow(f)), TEST_TIMEOUT_MS],
  [files.filter(isSlow), SLOW_TIMEOUT_MS],
]) {
  if (group.length === 0) continue;
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', `--test-timeout=${timeout}`, ...flagArgs, ...group], { stdio: 'inherit' });
  status ||= result.status ?? 1;
}
process.exit(status);
