import { setTimeout as sleep } from 'node:timers/promises';
import type { Libp2p } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';
import { BOOTSTRAP_DIAL_TIMEOUT_MS } from './constants.js';

export interface BootstrapReport {
  /** Initial peers this node connected to. */
  readonly connected: readonly string[];
  /** Initial peers that never answered, with the last error. */
  readonly failed: ReadonlyArray<{ readonly addr: string; readonly error: string }>;
}

export interface BootstrapOptions {
  readonly attempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly signal: AbortSignal;
  /** Called before each retry, so the node can log it. */
  readonly onRetry?: (addr: string, attempt: number, delayMs: number, error: string) => void;
}

/**
 * Dials every initial peer in parallel; each is retried with doubling backoff up to `attempts`
 * times. A dead peer only ends up in `failed`; the node keeps running either way.
 */
export async function bootstrap(libp2p: Pick<Libp2p, 'dial'>, peers: readonly Multiaddr[], options: BootstrapOptions): Promise<BootstrapReport> {
  const results = await Promise.all(peers.map((addr) => dialWithRetry(libp2p, addr, options)));
  return {
    connected: results.filter((r) => r.error === undefined).map((r) => r.addr),
    failed: results.flatMap((r) => (r.error === undefined ? [] : [{ addr: r.addr, error: r.error }])),
  };
}

async function dialWithRetry(libp2p: Pick<Libp2p, 'dial'>, addr: Multiaddr, options: BootstrapOptions): Promise<{ addr: string; error?: string }> {
  let delay = options.initialBackoffMs;
  let error = 'not attempted';
  for (let attempt = 1; attempt <= options.attempts && !options.signal.aborted; attempt++) {
    try {
      await libp2p.dial(addr, { signal: AbortSignal.any([options.signal, AbortSignal.timeout(BOOTSTRAP_DIAL_TIMEOUT_MS)]) });
      return { addr: addr.toString() };
    } catch (err) {
      error = (err as Error).message;
    }
    if (attempt === options.attempts) break;
    options.onRetry?.(addr.toString(), attempt, delay, error);
    try {
      await sleep(delay, undefined, { signal: options.signal });
    } catch {
      break; // the node is stopping
    }
    delay = Math.min(delay * 2, options.maxBackoffMs);
  }
  return { addr: addr.toString(), error };
}
