// What the charts draw of a series: the stored points, broken where the node was not training.
import type { SeriesData } from '../../../shared/api.js';

/** A pause between two points longer than this many times the series' median spacing is a gap… */
const GAP_FACTOR = 10;
/** …and longer than this (seconds), so a few slow steps do not break the line. */
const MIN_GAP_SECONDS = 60;

/**
 * uPlot's columns of a series, with a null point inside each gap (the node stopped or paused), so the
 * line breaks there instead of drawing a straight line across hours in which nothing was measured.
 */
export function chartColumns(d: SeriesData | undefined): [number[], (number | null)[]] {
  const t: number[] = [];
  const v: (number | null)[] = [];
  if (!d) return [t, v];
  const spacings = d.t.slice(1).map((x, i) => x - d.t[i]!).sort((a, b) => a - b);
  const gap = Math.max(MIN_GAP_SECONDS, GAP_FACTOR * (spacings[Math.floor(spacings.length / 2)] ?? 0));
  d.t.forEach((x, i) => {
    const before = d.t[i - 1];
    if (before !== undefined && x - before > gap) {
      t.push((before + x) / 2);
      v.push(null);
    }
    t.push(x);
    v.push(d.v[i]!);
  });
  return [t, v];
}
