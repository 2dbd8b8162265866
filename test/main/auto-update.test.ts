import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startAutoUpdate } from '../../src/main/auto-update.js';
import { tmpDir } from '../helpers/tmp.js';

test('an app built without an update feed (no app-update.yml in its resources) never checks for updates', (t) => {
  const errors: string[] = [];
  assert.equal(startAutoUpdate(tmpDir(t), (m) => errors.push(m)), false);
  assert.deepEqual(errors, []);
});
