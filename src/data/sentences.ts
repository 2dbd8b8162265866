// Abbreviations after which a period does not end a sentence (lower-case, without the period).
const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'dr', 'prof', 'sr', 'jr', 'st', 'vs', 'etc', 'e.g', 'i.e', 'no', 'vol', 'gen', 'col', 'lt', 'sgt',
  'capt', 'gov', 'sen', 'rep', 'rev', 'hon', 'jan', 'feb', 'mar', 'apr', 'jun', 'jul', 'aug', 'sep', 'sept', 'oct',
  'nov', 'dec', 'inc', 'ltd', 'co', 'corp', 'u.s', 'u.k', 'fig', 'al', 'approx', 'est', 'mt', 'ft',
]);

const BOUNDARY = /([.!?]+)(["')\]]*)\s+(?=["'([]?[A-Z0-9])/g;

/**
 * Rule-based English sentence segmentation (what nltk's punkt does for the seeds' script, minus the
 * trained model): split after . ! ? followed by space and a capital or digit, except after known
 * abbreviations and single-letter initials.
 */
export function splitSentences(paragraph: string): string[] {
  const out: string[] = [];
  let start = 0;
  BOUNDARY.lastIndex = 0;
  for (let m = BOUNDARY.exec(paragraph); m !== null; m = BOUNDARY.exec(paragraph)) {
    const end = m.index + m[1]!.length + m[2]!.length;
    if (m[1] === '.') {
      const word = /(\S+)$/.exec(paragraph.slice(start, m.index))?.[1]?.toLowerCase().replace(/^["'([]+/, '') ?? '';
      if (ABBREVIATIONS.has(word) || /^[a-z]$/i.test(word)) continue;
    }
    const s = paragraph.slice(start, end).trim();
    if (s.length > 0) out.push(s);
    start = end;
  }
  const rest = paragraph.slice(start).trim();
  if (rest.length > 0) out.push(rest);
  return out;
}
