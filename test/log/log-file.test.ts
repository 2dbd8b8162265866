import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { logDirOf, openLogFile, teeStream } from '../../src/log/log-file.js';
import { createLogger } from '../../src/log/logger.js';
import { tmpDir } from '../helpers/tmp.js';

test('the log file rotates at its size, keeps a bounded number of files, and gets every line stderr gets', async (t) => {
  const dir = logDirOf(tmpDir(t));
  const file = await openLogFile(dir, { maxBytes: 4096, keep: 2 });
  const stderr = new PassThrough();
  let echoed = '';
  stderr.on('data', (d: Buffer) => (echoed += d.toString()));
  const log = createLogger({ logLevel: 'info', logFormat: 'json' }, teeStream(stderr, file));
  // pino-roll rolls over when the stream drains, between turns of the event loop, as in a running node
  for (let i = 0; i < 200; i++) {
    log.info(`line ${i} ${'x'.repeat(60)}`);
    if (i % 10 === 9) await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setTimeout(resolve, 50)); // the last roll happens on 'drain'
  const closed = once(file, 'close');
  file.end();
  await closed;
  const files = fs.readdirSync(dir).sort();
  assert.ok(files.every((f) => /^cohort\.\d+\.log$/.test(f)), `numbered files: ${files.join(', ')}`);
  assert.ok(files.length <= 3, `the current file and at most 2 older ones are kept (${files.join(', ')})`);
  assert.ok(!files.includes('cohort.1.log'), `it rolled over and removed the oldest files (${files.join(', ')})`);
  const kept = files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('');
  assert.match(kept, /"msg":"line 199 x+"/, 'the last line is kept');
  assert.doesNotMatch(kept, /"msg":"line 0 x+"/, 'the first lines went with the removed files');
  for (const f of files) assert.ok(fs.statSync(path.join(dir, f)).size < 4096 + 1500, `${f} stays near the size limit`);
  assert.equal(echoed.split('\n').filter(Boolean).length, 200, 'stderr got every line');
});
