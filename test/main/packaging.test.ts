import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../helpers/cli.js';

interface BuilderConfig {
  linux?: { target?: string[] };
  win?: { target?: string[] };
  mac?: { target?: string[] };
  asarUnpack?: string[];
  npmRebuild?: boolean;
  electronFuses?: Record<string, boolean>;
}

const require = createRequire(import.meta.url);
// electron-builder's own modules, resolved the way electron-builder resolves them
const builderRequire = createRequire(require.resolve('app-builder-lib/package.json'));
const { getConfig, validateConfiguration } = builderRequire('./out/util/config/config') as {
  getConfig: (dir: string, file: string | null, extra: null) => Promise<BuilderConfig>;
  validateConfiguration: (config: unknown, logger: unknown) => Promise<void>;
};
const { DebugLogger } = builderRequire('builder-util/out/DebugLogger') as { DebugLogger: new (enabled: boolean) => unknown };


test("electron-builder.yml passes electron-builder's own schema check and lists all four installer targets", async () => {
  const config = await getConfig(ROOT, path.join(ROOT, 'electron-builder.yml'), null);
  await validateConfiguration(config, new DebugLogger(false));
  const targets = [...(config.linux?.target ?? []), ...(config.win?.target ?? []), ...(config.mac?.target ?? [])];
  assert.deepEqual(targets.sort(), ['AppImage', 'deb', 'dmg', 'nsis']);
  for (const native of ['better-sqlite3', 'onnxruntime-node']) assert.ok(config.asarUnpack?.some((p) => p.includes(native)), `${native} is unpacked from the asar`);
  assert.equal(config.npmRebuild, true, 'native modules are rebuilt for Electron while packaging');
  assert.equal(config.electronFuses?.runAsNode, false);
  assert.equal(config.electronFuses?.enableNodeOptionsEnvironmentVariable, false);
  assert.equal(config.electronFuses?.enableEmbeddedAsarIntegrityValidation, true);
});

test('a broken builder config is caught by the same check', async () => {
  await assert.rejects(validateConfiguration({ notAnOption: true }, new DebugLogger(false)), /unknown property 'notAnOption'/);
});
