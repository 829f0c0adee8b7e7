// The manuscript tree's numbers: word totals per arc and for the book, the next chapter
// to write, and finding a chapter by its ordinal.
import type { ArcNode, BookTree, ChapterNode } from '../api/writing'

export interface WordTotals {
  book: number
  arcs: Record<string, number>
  chapters: number
}

export function arcWords(arc: ArcNode): number {
  return arc.chapters.reduce((sum, c) => sum + c.words, 0)
}

/** Totals summed from the chapters (the server's arc figures may lag a save). */
export function wordTotals(tree: BookTree | null): WordTotals {
  const totals: WordTotals = { book: 0, arcs: {}, chapters: 0 }
  for (const arc of tree?.manuscript ?? []) {
    const words = arcWords(arc)
    totals.arcs[arc.path] = words
    totals.book += words
    totals.chapters += arc.chapters.length
  }
  return totals
}

export function allChapters(tree: BookTree | null): ChapterNode[] {
  return (tree?.manuscript ?? []).flatMap((arc) => arc.chapters).sort((a, b) => a.ordinal - b.ordinal)
}

/** The ordinal the next written chapter gets: one past the highest (1 for an empty book). */
export function nextOrdinal(tree: BookTree | null): number {
  return allChapters(tree).reduce((max, c) => Math.max(max, c.ordinal), 0) + 1
}

export function findChapter(tree: BookTree | null, ordinal: number): ChapterNode | null {
  return allChapters(tree).find((c) => c.ordinal === ordinal) ?? null
}

const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/g

/** Words as a writer counts them: each CJK character is one, other text splits on spaces. */
export function countWords(text: string): number {
  const cjk = text.match(CJK)?.length ?? 0
  const rest = text.replace(CJK, ' ').trim()
  return cjk + (rest ? rest.split(/\s+/).length : 0)
}
