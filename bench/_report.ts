/** Prints a benchmark's figures as the single JSON object on the last line of stdout (the bench convention). */
export function reportJson(figures: Record<string, number | string | boolean | null>): void {
  process.stdout.write(JSON.stringify(figures) + '\n');
}

/** Median of a list of numbers (robust against the noise of a shared 2-core machine). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of no values');
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
