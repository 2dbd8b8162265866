import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { CHECKPOINT_CHUNK_BYTES, CHECKPOINT_COMMIT_CHUNKS } from '../../src/store/checkpoints.js';
import { CHECKPOINT_DATABASE_FILE, CheckpointCorruptError, openStore } from '../../src/store/index.js';
import { ROOT } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

test('a checkpoint round-trips byte for byte, from one buffer or many pieces', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const data = new Uint8Array(2 * CHECKPOINT_CHUNK_BYTES + 17).map((_, i) => (i * 31) & 0xff);
  const whole = store.checkpoints.save({ kind: 'model', epoch: 3, meta: { preset: 'tiny' }, data });
  const pieces = [data.subarray(0, 5), data.subarray(5, CHECKPOINT_CHUNK_BYTES + 9), data.subarray(CHECKPOINT_CHUNK_BYTES + 9)];
  const split = store.checkpoints.save({ kind: 'model', epoch: 4, data: pieces });
  for (const info of [whole, split]) {
    const loaded = store.checkpoints.load(info.id);
    assert.equal(loaded.data.byteLength, data.byteLength);
    assert.equal(sha(loaded.data), sha(data));
    assert.equal(loaded.info.sha256, sha(data));
  }
  assert.deepEqual(store.checkpoints.load(whole.id).info.meta, { preset: 'tiny' });
  assert.equal(store.checkpoints.db.prepare('SELECT count(*) AS n FROM checkpoint_chunks WHERE checkpoint_id = ?').pluck().get(whole.id), 3);
});

test('keep prunes the oldest checkpoints of that kind only', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  store.checkpoints.save({ kind: 'optimizer', epoch: 0, data: new Uint8Array([1]) });
  for (let epoch = 1; epoch <= 5; epoch++) store.checkpoints.save({ kind: 'model', epoch, data: new Uint8Array([epoch]), keep: 2 });
  assert.deepEqual(store.checkpoints.list('model').map((c) => c.epoch), [5, 4]);
  assert.equal(store.checkpoints.list('optimizer').length, 1);
  assert.equal(store.checkpoints.db.prepare('SELECT count(*) FROM checkpoint_chunks').pluck().get(), 3, 'chunks of pruned checkpoints are deleted');
});

test('a damaged checkpoint fails its checksum; loadLatest falls back to an older one and reports it', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  const good = store.checkpoints.save({ kind: 'model', epoch: 1, data: new Uint8Array(1000).fill(1) });
  const bad = store.checkpoints.save({ kind: 'model', epoch: 2, data: new Uint8Array(1000).fill(2) });
  store.checkpoints.db.prepare('UPDATE checkpoint_chunks SET data = ? WHERE checkpoint_id = ?').run(Buffer.alloc(1000, 9), bad.id);
  assert.throws(() => store.checkpoints.load(bad.id), (e: unknown) => e instanceof CheckpointCorruptError && /fails its checksum/.test(e.message));
  const skipped: string[] = [];
  const latest = store.checkpoints.loadLatest('model', (e) => skipped.push(e.message));
  assert.equal(latest?.info.id, good.id);
  assert.equal(skipped.length, 1);
  assert.equal(store.checkpoints.list('model').length, 2, 'the damaged checkpoint is kept for inspection, not deleted');
  store.checkpoints.db.prepare('DELETE FROM checkpoint_chunks WHERE checkpoint_id = ?').run(good.id);
  assert.throws(() => store.checkpoints.load(good.id), /has 0 of 1 chunks/);
  // a byte changed through SQL's string functions leaves a text value in the row, not a blob
  const edited = store.checkpoints.save({ kind: 'model', epoch: 3, data: new Uint8Array(1000).fill(3) });
  store.checkpoints.db.prepare("UPDATE checkpoint_chunks SET data = substr(data, 1, 10) || x'00' || substr(data, 12) WHERE checkpoint_id = ?").run(edited.id);
  assert.throws(() => store.checkpoints.load(edited.id), (e: unknown) => e instanceof CheckpointCorruptError && /^checkpoint \d+ \(model, epoch 3\) is damaged: chunk 0 holds text, not bytes$/.test(e.message));
});

/** Runs the checkpoint-writer fixture and SIGKILLs it once it is in the middle of writing its second checkpoint. */
async function killMidWrite(dir: string, how: 'save' | 'saveChunked'): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'test/fixtures/checkpoint-writer.ts'), dir, how], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`writer never reached mid-write; stderr: ${err}`)), 60_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('mid-write\n')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', () => reject(new Error(`writer exited early; stdout: ${out}; stderr: ${err}`)));
  });
  child.kill('SIGKILL');
  assert.equal(await exited, 'SIGKILL');
  return out;
}

test('loadLatest skips damage only: a failure to read the file (its chunks table gone) is thrown, with no older checkpoint standing in', (t) => {
  const store = openStore(tmpDir(t));
  t.after(() => store.close());
  for (const epoch of [1, 2]) store.checkpoints.save({ kind: 'model', epoch, data: new Uint8Array(10).fill(epoch) });
  store.checkpoints.db.exec('DROP TABLE checkpoint_chunks');
  const skipped: string[] = [];
  assert.throws(() => store.checkpoints.loadLatest('model', (e) => skipped.push(e.message)), (e: unknown) => !(e instanceof CheckpointCorruptError) && /no such table: checkpoint_chunks/.test((e as Error).message));
  assert.deepEqual(skipped, []);
});

test('SIGKILL in the middle of writing a checkpoint leaves the previous one loadable', async (t) => {
  const dir = tmpDir(t);
  const out = await killMidWrite(dir, 'save');

  // the rollback journal: uncommitted pages reached the file itself, the journal is hot
  const file = path.join(dir, CHECKPOINT_DATABASE_FILE);
  const fileBytes = fs.statSync(file).size;
  assert.ok(fileBytes > 6 * CHECKPOINT_CHUNK_BYTES, `uncommitted pages reached the disk before the kill (${fileBytes} bytes)`);
  assert.ok(fs.statSync(`${file}-journal`).size > 0, 'a hot journal is left');

  const [, id, digest] = /saved (\d+) ([0-9a-f]{64})/.exec(out)!;
  const store = openStore(dir);
  t.after(() => store.close());
  assert.deepEqual(store.checkpoints.list('model').map((c) => c.epoch), [1], 'the half-written checkpoint is gone');
  const latest = store.checkpoints.loadLatest('model');
  assert.equal(latest?.info.id, Number(id));
  assert.equal(sha(latest.data), digest);
  assert.equal(store.checkpoints.db.prepare('SELECT count(*) FROM checkpoint_chunks').pluck().get(), 4, 'no orphan chunks remain');
  assert.equal(store.checkpoints.db.pragma('integrity_check', { simple: true }), 'ok');
  assert.ok(fs.statSync(file).size < fileBytes, 'the rollback gave the appended pages back');
});

test('SIGKILL in the middle of a chunked save leaves the previous checkpoint loadable; the next save clears the staged chunks', async (t) => {
  const dir = tmpDir(t);
  const out = await killMidWrite(dir, 'saveChunked');
  const [, id, digest] = /saved (\d+) ([0-9a-f]{64})/.exec(out)!;
  const store = openStore(dir);
  t.after(() => store.close());
  assert.equal(store.checkpoints.db.pragma('integrity_check', { simple: true }), 'ok');
  // the first commit's chunks are kept under the staging row; the two in the open commit rolled back
  assert.equal(store.checkpoints.db.prepare('SELECT count(*) FROM checkpoint_chunks').pluck().get(), 4 + CHECKPOINT_COMMIT_CHUNKS);
  assert.deepEqual(store.checkpoints.list().map((c) => [c.kind, c.epoch]), [['model', 1]], 'the staged checkpoint is not listed');
  const latest = store.checkpoints.loadLatest('model');
  assert.equal(latest?.info.id, Number(id));
  assert.equal(sha(latest.data), digest);

  const data = new Uint8Array(CHECKPOINT_CHUNK_BYTES + 5).fill(7);
  const next = store.checkpoints.saveChunked({ kind: 'model', epoch: 3, data, keep: 1 });
  assert.deepEqual(store.checkpoints.list('model').map((c) => c.epoch), [3]);
  assert.equal(sha(store.checkpoints.load(next.id).data), sha(data));
  assert.equal(store.checkpoints.db.prepare('SELECT count(*) FROM checkpoint_chunks').pluck().get(), 2, 'the staged and the pruned chunks are deleted');
});
