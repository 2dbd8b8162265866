import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { checkElectron } from '../../src/doctor/checks.js';
import { electronBinary } from '../../src/doctor/electron.js';
import { tmpDir } from '../helpers/tmp.js';

const require = createRequire(import.meta.url);

test('electronBinary finds the runtime named by path.txt, and says why when it cannot', (t) => {
  const dist = tmpDir(t);
  const previous = process.env.ELECTRON_OVERRIDE_DIST_PATH;
  t.after(() => (previous === undefined ? delete process.env.ELECTRON_OVERRIDE_DIST_PATH : (process.env.ELECTRON_OVERRIDE_DIST_PATH = previous)));
  process.env.ELECTRON_OVERRIDE_DIST_PATH = dist;
  const before = electronBinary();
  if (!fs.existsSync(path.join(path.dirname(require.resolve('electron/package.json')), 'path.txt'))) {
    assert.deepEqual(before.found, false);
    assert.match((before as { reason: string }).reason, /never downloaded/);
    return;
  }
  // path.txt exists (a desktop install): the override directory decides
  const relative = fs.readFileSync(path.join(path.dirname(require.resolve('electron/package.json')), 'path.txt'), 'utf8');
  assert.equal(before.found, false);
  fs.mkdirSync(path.dirname(path.join(dist, relative)), { recursive: true });
  fs.writeFileSync(path.join(dist, relative), '');
  assert.deepEqual(electronBinary(), { found: true, path: path.join(dist, relative) });
});

test('doctor on the npm package (no electron package, a dev dependency) says the package is the headless node, not to run `npm ci` in a checkout it does not have', () => {
  const packaged = checkElectron({ found: false, reason: 'the electron package is not installed', packageMissing: true });
  assert.equal(packaged.status, 'missing');
  assert.match(packaged.fix ?? '', /the npm package is the headless node.*`cohort start` serves the dashboard/);
  assert.doesNotMatch(packaged.fix ?? '', /run `npm ci` again|npm start/);
  // a checkout whose download failed: npm ci there fetches it
  assert.match(checkElectron({ found: false, reason: 'the Electron runtime was never downloaded' }).fix ?? '', /run `npm ci` again/);
});
