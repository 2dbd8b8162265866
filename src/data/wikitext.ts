import type { Document } from './document.js';

// WikiText-103 raw: ` = Title = ` starts an article, ` = = Section = = ` (and deeper) a subsection.
const ARTICLE_HEADING = /^ ?= ([^=].*?) = ?$/;
const SECTION_HEADING = /^ ?(= ){2,}.*?( =){2,} ?$/;

/** True when the text looks like WikiText raw (has at least one article heading line). */
export function isWikiText(text: string): boolean {
  for (const line of text.split('\n', 2000)) if (ARTICLE_HEADING.test(line.trimEnd())) return true;
  return false;
}

/**
 * Splits WikiText raw into articles. Section headings are dropped (they are not prose), blank lines
 * delimit paragraphs, and text before the first heading becomes an untitled article.
 */
export function parseWikiText(text: string): Document[] {
  const docs: Document[] = [];
  let title = '';
  let paragraphs: string[] = [];
  const flush = () => {
    if (paragraphs.length > 0) docs.push({ title, paragraphs });
    paragraphs = [];
  };
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    const article = ARTICLE_HEADING.exec(line);
    if (article && !SECTION_HEADING.test(line)) {
      flush();
      title = article[1]!.trim();
      continue;
    }
    if (SECTION_HEADING.test(line)) continue;
    const para = line.trim();
    if (para.length > 0) paragraphs.push(para);
  }
  flush();
  return docs;
}

/** Plain text: the whole file is one document, blank lines delimit paragraphs (lines inside a paragraph are joined). */
export function parsePlainText(title: string, text: string): Document[] {
  const paragraphs = text
    .split(/\r?\n\s*\r?\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p.length > 0);
  return paragraphs.length > 0 ? [{ title, paragraphs }] : [];
}
