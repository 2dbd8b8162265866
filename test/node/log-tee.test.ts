import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger } from '../../src/log/logger.js';
import { LogRing } from '../../src/node/log-ring.js';
import { teeLogger } from '../../src/node/log-tee.js';

function memoryLogger(level: 'info' | 'debug') {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { log: createLogger({ logLevel: level, logFormat: 'json' }, sink), lines };
}

test('lines logged through the tee reach both the log and the dashboard ring, children included', () => {
  const { log, lines } = memoryLogger('info');
  const ring = new LogRing();
  const teed = teeLogger(log, ring);
  teed.info('Collaboration accumulated 512 samples from 3 peers; ETA 12 seconds');
  teed.warn({ peer: 'p1' }, 'peer excluded: timeout');
  teed.child({ part: 'averager' }).error(new Error('Allreduce group not found'));
  teed.debug('debug lines stay out of the panel');
  assert.deepEqual(
    ring.after().map((l) => [l.level, l.msg]),
    [
      ['info', 'Collaboration accumulated 512 samples from 3 peers; ETA 12 seconds'],
      ['warn', 'peer excluded: timeout'],
      ['error', 'Allreduce group not found'],
    ],
  );
  assert.equal(lines.length, 3, 'the log itself still gets every enabled line');

  const quiet = teeLogger(createLogger({ logLevel: 'silent', logFormat: 'json' }), ring);
  quiet.info('a quiet terminal still fills the panel');
  assert.equal(ring.after().at(-1)?.msg, 'a quiet terminal still fills the panel');
  assert.match(lines[1]!, /"peer":"p1"/);
  assert.equal(teed.isLevelEnabled('debug'), false, 'other logger methods pass through');
});

test('the ring keeps only the newest lines', () => {
  const ring = new LogRing(3);
  for (let i = 1; i <= 5; i++) ring.push('info', `line ${i}`);
  assert.deepEqual(ring.after().map((l) => l.msg), ['line 3', 'line 4', 'line 5']);
  assert.deepEqual(ring.after(4).map((l) => l.msg), ['line 5']);
  assert.equal(ring.lastSeq, 5);
  assert.throws(() => new LogRing(0), /capacity 0/);
});
