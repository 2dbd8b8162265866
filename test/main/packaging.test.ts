import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../helpers/cli.js';

interface BuilderConfig {
  linux?: { target?: string[]; files?: string[] };
  win?: { target?: string[]; files?: string[] };
  mac?: { target?: string[]; files?: string[] };
  deb?: { depends?: string[] };
  protocols?: Array<{ name: string; schemes: string[] }>;
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
// the glob matcher electron-builder applies `files` patterns with
const { minimatch } = builderRequire('minimatch') as { minimatch: (file: string, pattern: string) => boolean };
const { DebugLogger } = builderRequire('builder-util/out/DebugLogger') as { DebugLogger: new (enabled: boolean) => unknown };
// electron-builder logs ("• loaded configuration …") to stdout, the channel node:test's child process
// reports on: a clean-clone CI run failed the file with "Unable to deserialize cloned data"
const { log: builderLog } = builderRequire('builder-util/out/log') as { log: { stream: NodeJS.WritableStream } };
builderLog.stream = process.stderr;


test("electron-builder.yml passes electron-builder's own schema check and lists every installer target (the mac zip feeds auto-update)", async () => {
  const config = await getConfig(ROOT, path.join(ROOT, 'electron-builder.yml'), null);
  await validateConfiguration(config, new DebugLogger(false));
  const targets = [...(config.linux?.target ?? []), ...(config.win?.target ?? []), ...(config.mac?.target ?? [])];
  assert.deepEqual(targets.sort(), ['AppImage', 'deb', 'dmg', 'nsis', 'zip']);
  for (const native of ['better-sqlite3', 'onnxruntime-node']) assert.ok(config.asarUnpack?.some((p) => p.includes(native)), `${native} is unpacked from the asar`);
  assert.equal(config.npmRebuild, true, 'native modules are rebuilt for Electron while packaging');
  assert.equal(config.electronFuses?.runAsNode, false);
  assert.equal(config.electronFuses?.enableNodeOptionsEnvironmentVariable, false);
  assert.equal(config.electronFuses?.enableEmbeddedAsarIntegrityValidation, true);
});

test('a broken builder config is caught by the same check', async () => {
  await assert.rejects(validateConfiguration({ notAnOption: true }, new DebugLogger(false)), /unknown property 'notAnOption'/);
});

test('the app registers the cohort: scheme, the deb keeps electron-builder\'s default dependencies, and each installer carries only its platform\'s onnxruntime binaries', async () => {
  const config = await getConfig(ROOT, path.join(ROOT, 'electron-builder.yml'), null);
  assert.deepEqual(config.protocols?.flatMap((p) => p.schemes), ['cohort']);
  assert.equal(config.deb?.depends, undefined, 'no depends list replaces the defaults (libgtk-3-0, libnotify4, libnss3, …)');
  const platforms = { linux: config.linux, win32: config.win, darwin: config.mac } as const;
  for (const [own, section] of Object.entries(platforms)) {
    const excluded = (file: string): boolean => (section?.files ?? []).some((p) => p.startsWith('!') && minimatch(file, p.slice(1)));
    for (const platform of Object.keys(platforms)) {
      const binary = `node_modules/onnxruntime-node/bin/napi-v6/${platform}/x64/onnxruntime_binding.node`;
      assert.equal(excluded(binary), platform !== own, `${own} installer ${platform === own ? 'keeps' : 'drops'} ${binary}`);
    }
  }
});
