// Paths a user names for output (`--out`, `--grads`) that cannot take it: one line naming the path and
// the reason, exit 2, before any work, nothing written; a write that fails midway leaves the folder as it was.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { loadModel, saveModel } from '../../src/engine/index.js';
import { openStore } from '../../src/store/index.js';
import { cohortInProcess } from '../helpers/cli.js';
import { fill, smallDisk } from '../helpers/disk.js';
import { tmpDir } from '../helpers/tmp.js';

/** A whole model folder of the tiny model with `vocabSize` tokens, with a tokenizer.json beside it. */
function modelFolder(dir: string, vocabSize: number): void {
  const config = checkConfig({ ...PRESETS.tiny, vocabSize });
  saveModel(dir, config, initAlbertParams(config, 1));
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), `{"vocab": ${vocabSize}}`);
}

/** A temporary folder with a data directory (an empty store) and a model folder of 64 tokens to export. */
function exportable(t: TestContext): { dir: string; data: string; model: string } {
  const dir = tmpDir(t);
  const data = path.join(dir, 'data');
  openStore(data).close();
  const model = path.join(dir, 'model');
  modelFolder(model, 64);
  return { dir, data, model };
}

/** Every file and folder under `dir`, relative. */
function tree(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
}

test('an --out or --grads that cannot be written exits 2 before any work, with one line naming the path and why, and writes nothing', { timeout: 120_000 }, async (t) => {
  const { dir, data, model } = exportable(t);
  const file = path.join(dir, 'a-file');
  fs.writeFileSync(file, 'not a folder');
  const before = tree(dir);

  const folderOuts: Array<[string, string]> = [
    [file, `${file} is a file, not a folder`],
    [path.join(file, 'sub'), `${file} is a file, so ${path.join(file, 'sub')} cannot be created`],
  ];
  const fileOuts: Array<[string, string]> = [
    [model, `${model} is a folder, not a file`],
    [path.join(file, 'x.csv'), `${file} is a file, so ${path.join(file, 'x.csv')} cannot be created`],
    [path.join(dir, 'missing', 'x.csv'), `the folder ${path.join(dir, 'missing')} does not exist`],
  ];
  const commands: Array<[string[], string, Array<[string, string]>]> = [
    [['model', 'init', '--preset', 'tiny'], '--out', folderOuts],
    [['model', 'export', '--from', model, '--data-dir', data], '--out', folderOuts],
    [['train', '--preset', 'tiny', '--steps', '1', '--data', 'synthetic', '--data-dir', path.join(dir, 'train')], '--out', folderOuts],
    [['run', '--run-id', 'out-check', '--listen', '/ip4/127.0.0.1/tcp/0', '--data-dir', path.join(dir, 'run')], '--out', folderOuts],
    [['metrics', 'export', '--data-dir', data], '--out', fileOuts],
    [['model', 'loss', '--model', model, '--batch', path.join(dir, 'batch.json')], '--grads', fileOuts],
  ];
  for (const [args, flag, outs] of commands) {
    for (const [out, why] of outs) {
      const r = await cohortInProcess([...args, flag, out]);
      const what = `${args.slice(0, 2).join(' ')} ${flag} ${out}`;
      assert.equal(r.code, 2, `${what}: ${r.stderr}`);
      assert.equal(r.stderr, `cohort: ${flag}: ${why}\n`, what);
    }
  }
  assert.deepEqual(tree(dir), before, 'nothing written: no folder made, no partial file, no store opened');
});

test('model export onto a folder whose disk fills midway: exit 1 naming the folder, which keeps the model it had whole, with nothing half-written beside it', { timeout: 120_000 }, async (t) => {
  const disk = smallDisk(t, 1);
  if (disk === undefined) return t.skip('needs root on Linux to mount a small tmpfs');
  const { data, model: from } = exportable(t);
  // an earlier export there (a smaller vocabulary), on a full disk: the new files cannot all be
  // written (in place, the old weights' room would not hold the new, larger ones either)
  const out = path.join(disk, 'export');
  modelFolder(out, 32);
  fill(path.join(disk, 'filler'));

  const r = await cohortInProcess(['model', 'export', '--from', from, '--data-dir', data, '--out', out]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`^cohort: could not write ${out}: ENOSPC[^\\n]*\\n$`));
  assert.deepEqual(fs.readdirSync(disk).sort(), ['export', 'filler'], 'no partial folder left');
  assert.equal(loadModel(out).config.vocabSize, 32, 'the earlier export is whole: its config.json and weights go together');
  assert.equal(fs.readFileSync(path.join(out, 'tokenizer.json'), 'utf8'), '{"vocab": 32}');

  // with room, the export replaces the files it writes
  fs.rmSync(path.join(disk, 'filler'));
  assert.equal((await cohortInProcess(['model', 'export', '--from', from, '--data-dir', data, '--out', out])).code, 0);
  assert.equal(loadModel(out).config.vocabSize, 64);
  assert.deepEqual(fs.readdirSync(disk), ['export']);
});

test('model loss --grads and train --out onto a disk that fills midway: exit 1 naming the path, the old file and folder kept whole, nothing half-written beside them', { timeout: 120_000 }, async (t) => {
  const disk = smallDisk(t, 1);
  if (disk === undefined) return t.skip('needs root on Linux to mount a small tmpfs');
  const { dir, model } = exportable(t);
  const batch = path.join(dir, 'batch.json');
  fs.writeFileSync(batch, JSON.stringify({ input_ids: [[2, 10, 4, 12, 3]], token_type_ids: [[0, 0, 0, 1, 1]], attention_mask: [[1, 1, 1, 1, 1]], labels: [[-100, -100, 11, -100, -100]], sentence_order_label: [1] }));
  // what earlier runs wrote there: a gradients file, a trained model
  const grads = path.join(disk, 'grads.safetensors');
  fs.writeFileSync(grads, 'the gradients of an earlier run');
  const out = path.join(disk, 'trained');
  modelFolder(out, 32);
  fill(path.join(disk, 'filler'));

  const loss = await cohortInProcess(['model', 'loss', '--model', model, '--batch', batch, '--grads', grads, '--provider', 'cpu']);
  assert.equal(loss.code, 1, loss.stderr);
  assert.match(loss.stderr, new RegExp(`^cohort: could not write ${grads}: ENOSPC[^\\n]*\\n$`, 'm'));
  assert.equal(fs.readFileSync(grads, 'utf8'), 'the gradients of an earlier run');

  const train = await cohortInProcess(['train', '--preset', 'tiny', '--steps', '1', '--batch-size', '2', '--seq-len', '16', '--data', 'synthetic', '--data-dir', path.join(dir, 'train'), '--out', out, '--provider', 'cpu']);
  assert.equal(train.code, 1, train.stderr);
  assert.match(train.stderr, new RegExp(`^cohort: could not write ${out}: ENOSPC[^\\n]*\\n$`, 'm'));
  assert.equal(loadModel(out).config.vocabSize, 32, 'the earlier model is whole: its config.json and weights go together');
  assert.deepEqual(fs.readdirSync(disk).sort(), ['filler', 'grads.safetensors', 'trained'], 'no partial file or folder left');
});
