/**
 * Misbehaviour an averager can be told to show, for fault-injection tests only (hivemind's `Fault`
 * enum). The default is none; nothing in production sets it.
 */
export type Fault =
  /** sends NaN in every chunk of its parts */
  | 'send-nan'
  /** sends its first chunk one value short */
  | 'send-wrong-length'
  /** sends one chunk of each part, then nothing (keeps the streams open) */
  | 'stall-sending'
  /** as a reducer, accepts chunks but never returns an average */
  | 'stall-reducing'
  /** as a reducer, answers every chunk with 1e7 instead of the average */
  | 'lie-reducing'
  /** as a reducer, answers every chunk with NaN */
  | 'nan-reducing';

/** What a faulty sender puts on the wire instead of `values` (chunk `index` of a part). */
export function corrupt(fault: Fault | undefined, index: number, values: Float32Array): Float32Array | 'stall' {
  if (fault === 'send-nan') return values.map(() => Number.NaN);
  if (fault === 'send-wrong-length' && index === 0) return values.subarray(0, Math.max(0, values.length - 1));
  if (fault === 'stall-sending' && index > 0) return 'stall';
  return values;
}
