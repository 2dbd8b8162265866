/**
 * What a node already told its volunteer (a peer of another release, another schema): each notice
 * once for the node's life, not once a round or a connection. At most `max` are remembered, the
 * oldest forgotten first, so a swarm of thousands of such peers cannot grow it without bound.
 */
export class Notices {
  private readonly told = new Set<string>();

  constructor(private readonly max = 4096) {}

  /** Whether `notice` was given (and is still remembered). */
  has(notice: string): boolean {
    return this.told.has(notice);
  }

  /** Whether `notice` is new (and from now on remembered). */
  first(notice: string): boolean {
    if (this.told.has(notice)) return false;
    if (this.told.size >= this.max) this.told.delete(this.told.values().next().value!);
    this.told.add(notice);
    return true;
  }
}
