import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import '../../src/runtime/polyfills.js';
import { deadline } from '../../src/averaging/framing.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

test('timeouts combined with other signals still fire after a garbage collection', async () => {
  const fired: number[] = [];
  // only the composites are kept: on plain Node 20 their timeout sources are weakly held and a GC drops them
  const composites = Array.from({ length: 50 }, (_, i) => {
    const signal = i % 2 === 0 ? AbortSignal.any([AbortSignal.timeout(150), new AbortController().signal]) : deadline(150, new AbortController().signal);
    signal.addEventListener('abort', () => fired.push(i), { once: true });
    return signal;
  });
  // a WeakRef's target survives the job that created it, so collect in a later one
  await new Promise((resolve) => setTimeout(resolve, 20));
  gc();
  await new Promise((resolve) => setTimeout(resolve, 600));
  assert.equal(fired.length, composites.length, `${composites.length - fired.length} of ${composites.length} deadlines never fired`);
  assert.ok(composites.every((s) => (s.reason as Error).name === 'TimeoutError'));
});
