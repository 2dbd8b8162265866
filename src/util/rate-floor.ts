/**
 * How long a transfer of `bytes` may take under a floor of `bytesPerSecond`: a grace (the stall or idle
 * timeout) plus its bytes at that rate. A sender keeping just within the stall timeout never stalls
 * and would hold the transfer for ever; one that had this long for `bytes` is dropped.
 */
export function rateFloorMs(bytes: number, graceMs: number, bytesPerSecond: number): number {
  return graceMs + (1000 * bytes) / bytesPerSecond;
}
