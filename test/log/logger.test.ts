import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { createLogger } from '../../src/log/logger.js';

function capture(format: 'json' | 'pretty', level: 'info' | 'warn') {
  const sink = new PassThrough();
  let text = '';
  sink.on('data', (d: Buffer) => (text += d.toString()));
  const log = createLogger({ logFormat: format, logLevel: level }, sink);
  return { log, text: () => text };
}

test('json format writes one JSON object per line with level and message', () => {
  const { log, text } = capture('json', 'info');
  log.info({ peers: 3 }, 'Averaged gradients with 3 peers');
  log.flush();
  const line = JSON.parse(text().trim()) as { level: number; msg: string; peers: number };
  assert.equal(line.msg, 'Averaged gradients with 3 peers');
  assert.equal(line.peers, 3);
  assert.equal(line.level, 30);
});

test('pretty format is human-readable and the level filters lines', () => {
  const { log, text } = capture('pretty', 'warn');
  log.info('hidden');
  log.warn('Step #3, loss 2.5');
  assert.doesNotMatch(text(), /hidden/);
  assert.match(text(), /WARN.*Step #3, loss 2\.5/);
  assert.doesNotMatch(text(), /^\{/);
});
