import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dashboardWindowOptions, isAppUrl } from '../../src/main/window-options.js';

test("the dashboard window follows Electron's security checklist", () => {
  const prefs = dashboardWindowOptions('/app/preload.cjs').webPreferences!;
  assert.equal(prefs.contextIsolation, true);
  assert.equal(prefs.sandbox, true);
  assert.equal(prefs.nodeIntegration, false);
  assert.equal(prefs.nodeIntegrationInWorker, false);
  assert.equal(prefs.nodeIntegrationInSubFrames, false);
  assert.equal(prefs.webSecurity, true);
  assert.equal(prefs.allowRunningInsecureContent, false);
  assert.equal(prefs.webviewTag, false);
  assert.equal(prefs.experimentalFeatures, false);
  assert.equal(prefs.preload, '/app/preload.cjs');
});

test('navigation is limited to the app origin, checked with a real URL parser', () => {
  assert.equal(isAppUrl('http://localhost:5173/settings', 'http://localhost:5173'), true);
  assert.equal(isAppUrl('http://localhost:5173.evil.example/', 'http://localhost:5173'), false);
  assert.equal(isAppUrl('https://example.org/', 'http://localhost:5173'), false);
  assert.equal(isAppUrl('file:///opt/Cohort/resources/app.asar/out/renderer/index.html', 'file://'), true);
  assert.equal(isAppUrl('not a url', 'file://'), false);
});
