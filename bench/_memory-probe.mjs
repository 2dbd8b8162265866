// Loaded into each swarm-lab process with `node --import` (bench/swarm-lab.ts): every 20 s, one JSON
// line to $COHORT_LAB_MEMORY_FILE with the main thread's view of its memory. `liveHeapMb` is the V8
// heap in use right after the latest full (mark-compact) collection: what the JavaScript heap really
// retains, where heapTotal swings with garbage not yet collected.
import fs from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import v8 from 'node:v8';
import { isMainThread } from 'node:worker_threads';

const file = process.env.COHORT_LAB_MEMORY_FILE;
// worker threads inherit execArgv: only the main thread reports
if (isMainThread && file) {
  const mb = (bytes) => Number((bytes / 2 ** 20).toFixed(1));
  let liveHeap;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) liveHeap = v8.getHeapStatistics().used_heap_size;
  }).observe({ entryTypes: ['gc'] });
  const sample = () => {
    const { rss, heapTotal, heapUsed } = process.memoryUsage();
    const line = { at: Date.now(), rssMb: mb(rss), heapTotalMb: mb(heapTotal), heapUsedMb: mb(heapUsed), ...(liveHeap === undefined ? {} : { liveHeapMb: mb(liveHeap) }) };
    fs.appendFile(file, JSON.stringify(line) + '\n', () => undefined);
  };
  setInterval(sample, 20_000).unref();
}
