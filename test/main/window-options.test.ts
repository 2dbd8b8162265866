import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dashboardWindowOptions, isAppUrl, isFromAppWindow } from '../../src/main/window-options.js';

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

test('IPC is answered only for the app window\'s own top frame', () => {
  const mainFrame = { name: 'top' };
  const webContents = { mainFrame };
  const win = { isDestroyed: () => false, webContents };
  assert.equal(isFromAppWindow({ sender: webContents, senderFrame: mainFrame }, win), true);
  assert.equal(isFromAppWindow({ sender: webContents, senderFrame: { name: 'iframe' } }, win), false, 'a subframe is refused');
  assert.equal(isFromAppWindow({ sender: { mainFrame }, senderFrame: mainFrame }, win), false, 'another webContents is refused');
  assert.equal(isFromAppWindow({ sender: webContents, senderFrame: null }, win), false, 'a navigated-away frame is refused');
  assert.equal(isFromAppWindow({ sender: webContents, senderFrame: mainFrame }, { ...win, isDestroyed: () => true }), false);
  assert.equal(isFromAppWindow({ sender: webContents, senderFrame: mainFrame }, undefined), false);
});
