// Smoke test of the real desktop app through playwright's _electron driver. It needs the Electron
// runtime binary, which machines that cannot reach Electron's download site lack: there it is
// skipped with a message (the browser tests cover the same renderer in Chromium).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { _electron } from 'playwright-core';
import { electronBinary } from '../../src/doctor/electron.js';
import { ROOT } from '../helpers/cli.js';
import { skipWhenMissing } from '../helpers/skip.js';
import { ARTEFACTS, ensureRendererBuilt } from './browser.js';

const electron = electronBinary();
const skip = skipWhenMissing(electron.found ? undefined : `no Electron runtime here (${electron.reason})`, 'the Electron smoke test');

test('the desktop app opens its window with the preload API and no Node in the page', { skip }, async (t) => {
  if (!electron.found) return;
  await ensureRendererBuilt();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-electron-'));
  const app = await _electron.launch({ executablePath: electron.path, args: [ROOT], cwd: ROOT, env: { ...process.env, COHORT_DATA_DIR: dataDir }, timeout: 60_000 });
  t.after(async () => {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  const page = await app.firstWindow();
  await page.getByRole('heading', { name: 'Cohort', exact: true }).waitFor({ timeout: 30_000 });
  const exposed = await page.evaluate(() => ({ api: typeof (window as unknown as { cohort?: { getSnapshot?: unknown } }).cohort?.getSnapshot, node: typeof (globalThis as { require?: unknown }).require }));
  assert.deepEqual(exposed, { api: 'function', node: 'undefined' });
  await page.getByRole('heading', { name: 'Welcome to Cohort' }).waitFor({ timeout: 30_000 });
  fs.mkdirSync(ARTEFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTEFACTS, 'electron.png') });
});
