/**
 * Cohort's metrics as prom-client collectors. Each family reads its values from their owner (swarm
 * stats, the store) when scraped, so nothing is copied on a timer and a label set that disappears
 * (a peer gone) leaves the output. Every `/metrics` Cohort serves is one prom-client Registry.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

type Samples = ReadonlyArray<readonly [labels: Readonly<Record<string, string>>, value: number]>;

export interface MetricFamily {
  readonly name: string;
  /** counter: a running total read from its owner (it only grows while the owner lives). */
  readonly type: 'gauge' | 'counter';
  readonly help: string;
  readonly labelNames?: readonly string[];
  /** The family's samples now. */
  read(): Samples;
}

/**
 * A registry of `families`, plus prom-client's process and Node.js metrics (CPU, memory, event-loop
 * lag, GC, handles) when `processMetrics` is set. Names and labels are checked by prom-client, which
 * also escapes label values and help text, so volunteer-chosen names cannot break the format.
 */
export function metricsRegistry(families: readonly MetricFamily[], { processMetrics = false } = {}): Registry {
  const registry = new Registry();
  for (const f of families) {
    const common = { name: f.name, help: f.help, labelNames: [...(f.labelNames ?? [])], registers: [registry] };
    /** Restates the family's samples; prom-client counters only grow by inc(), so a total read from its owner is reset then added. */
    function collect(this: Gauge | Counter, put: (labels: Readonly<Record<string, string>>, value: number) => void): void {
      this.reset();
      const rows = f.read();
      // reset() leaves a label-less metric at 0; a value never recorded has no sample instead
      if (rows.length === 0 && common.labelNames.length === 0) this.remove();
      for (const [labels, value] of rows) put(labels, value);
    }
    if (f.type === 'gauge') {
      new Gauge({
        ...common,
        collect() {
          collect.call(this, (labels, value) => this.set(labels, value));
        },
      });
    } else {
      new Counter({
        ...common,
        collect() {
          collect.call(this, (labels, value) => this.inc(labels, value));
        },
      });
    }
  }
  if (processMetrics) collectDefaultMetrics({ register: registry });
  return registry;
}

/** The families as Prometheus text (what a scrape of their registry returns). */
export async function prometheusText(families: readonly MetricFamily[]): Promise<string> {
  return metricsRegistry(families).metrics();
}
