/**
 * One document of the corpus: sentence-order pairs are built within a document, never across two.
 * `paragraphs` keep the source's blank-line structure (WikiText sections become paragraphs too).
 */
export interface Document {
  readonly title: string;
  readonly paragraphs: readonly string[];
}
