import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ConfigError, resolveConfig } from '../../src/config/load.js';
import { envName, flagName } from '../../src/config/settings.js';
import { tmpDir } from '../helpers/tmp.js';

test('names of flags and env variables derive from the setting key', () => {
  assert.equal(flagName('dataDir'), '--data-dir');
  assert.equal(envName('dashboardPort'), 'COHORT_DASHBOARD_PORT');
});

test('precedence: flags over env over config file over defaults', (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, 'cohort.config.json');
  fs.writeFileSync(file, JSON.stringify({ logLevel: 'debug', dashboardPort: 9001, dataDir: '/from/file' }));
  const env = { COHORT_LOG_LEVEL: 'warn', COHORT_DATA_DIR: '/from/env' };

  const defaults = resolveConfig({ env: {} });
  assert.equal(defaults.logLevel, 'info');
  assert.equal(defaults.dashboardPort, 7870);
  assert.deepEqual(defaults.initialPeers, []);

  const fromFile = resolveConfig({ env: {}, file });
  assert.equal(fromFile.logLevel, 'debug');
  assert.equal(fromFile.dashboardPort, 9001);

  const fromEnv = resolveConfig({ env, file });
  assert.equal(fromEnv.logLevel, 'warn');
  assert.equal(fromEnv.dataDir, '/from/env');
  assert.equal(fromEnv.dashboardPort, 9001, 'a setting absent from env still comes from the file');

  const fromFlags = resolveConfig({ env, file, flags: { logLevel: 'error', dataDir: '/from/flag' } });
  assert.equal(fromFlags.logLevel, 'error');
  assert.equal(fromFlags.dataDir, '/from/flag');
});

test('string values are coerced: ports, booleans and comma lists', () => {
  const c = resolveConfig({ env: { COHORT_DASHBOARD_PORT: '8080', COHORT_MOVE_ASIDE: 'yes', COHORT_INITIAL_PEERS: ' /ip4/127.0.0.1/tcp/1 , /ip4/127.0.0.1/tcp/2 ,' } });
  assert.equal(c.dashboardPort, 8080);
  assert.equal(c.moveAside, true);
  assert.deepEqual(c.initialPeers, ['/ip4/127.0.0.1/tcp/1', '/ip4/127.0.0.1/tcp/2']);
});

test('a bad value names its source and the accepted values', () => {
  assert.throws(() => resolveConfig({ env: {}, flags: { logLevel: 'loud' } }), (err: unknown) => {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.source, '--log-level');
    assert.match(err.message, /"loud"/);
    assert.match(err.message, /accepted: trace, debug, info/);
    return true;
  });
  assert.throws(() => resolveConfig({ env: { COHORT_DASHBOARD_PORT: '70000' } }), /COHORT_DASHBOARD_PORT: invalid value "70000".*0 to 65535/);
  assert.throws(() => resolveConfig({ env: { COHORT_MOVE_ASIDE: 'maybe' } }), /COHORT_MOVE_ASIDE/);
});

test('config file errors: unreadable, not JSON, not an object, unknown keys, bad values', (t) => {
  const dir = tmpDir(t);
  const write = (name: string, text: string) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    return f;
  };
  assert.throws(() => resolveConfig({ file: path.join(dir, 'absent.json') }), /cannot be read/);
  assert.throws(() => resolveConfig({ file: write('a.json', '{ not json') }), /is not valid JSON/);
  assert.throws(() => resolveConfig({ file: write('b.json', '[1, 2]') }), /must hold a JSON object/);
  assert.throws(() => resolveConfig({ file: write('c.json', '{"logLevl": "debug"}') }), /unknown setting\(s\) "logLevl"; known: dataDir/);
  assert.throws(() => resolveConfig({ file: write('d.json', '{"dashboardPort": "x"}') }), /config file .*d\.json: "dashboardPort": invalid value/);
});
