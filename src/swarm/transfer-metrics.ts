import type { Metrics, MultiaddrConnection, Stream } from '@libp2p/interface';

export type TransferTotals = Record<string, { sent: number; received: number }>;

interface Tracked {
  dispatchEvent(event: Event): boolean;
  send(data: { byteLength: number }): boolean;
}

// One object that satisfies every metric shape libp2p asks for (gauge, counter, histogram,
// summary and their groups); only byte counts are kept.
const noop = { update() {}, increment() {}, decrement() {}, reset() {}, observe() {}, timer: () => () => {} };

/**
 * The libp2p `metrics` component, reduced to what Cohort reports: bytes sent and received per
 * protocol (and `global` for whole connections). @libp2p/prometheus-metrics does this too, but
 * keeps its metrics in module-global maps, so two nodes in one process (tests, benchmarks) share
 * counters. Counting follows its method: observe dispatched `message` events and wrap `send`,
 * without adding a message listener (that would start the stream's data flow early).
 */
export class TransferMetrics {
  private readonly totals: TransferTotals = {};

  component(): () => Metrics {
    const metrics = {
      trackMultiaddrConnection: (conn: MultiaddrConnection) => this.track(conn, 'global'),
      trackProtocolStream: (stream: Stream) => {
        if (stream.protocol !== undefined) this.track(stream, stream.protocol);
      },
      registerMetric: () => noop,
      registerMetricGroup: () => noop,
      registerCounter: () => noop,
      registerCounterGroup: () => noop,
      registerHistogram: () => noop,
      registerHistogramGroup: () => noop,
      registerSummary: () => noop,
      registerSummaryGroup: () => noop,
      traceFunction: <F>(_name: string, fn: F) => fn,
      createTrace: () => undefined,
    };
    return () => metrics;
  }

  snapshot(): TransferTotals {
    return Object.fromEntries(Object.entries(this.totals).map(([k, v]) => [k, { ...v }]));
  }

  private track(target: Tracked, name: string): void {
    const slot = (this.totals[name] ??= { sent: 0, received: 0 });
    const dispatch = target.dispatchEvent.bind(target);
    target.dispatchEvent = (event: Event) => {
      if (event.type === 'message') slot.received += (event as Event & { data: { byteLength: number } }).data.byteLength;
      return dispatch(event);
    };
    const send = target.send.bind(target);
    target.send = (data) => {
      slot.sent += data.byteLength;
      return send(data);
    };
  }
}
