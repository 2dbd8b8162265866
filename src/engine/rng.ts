/** A small seeded PRNG (mulberry32) so that model init and synthetic data are reproducible from a seed. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }

  /** Fills `out` with normal(mean, std) samples (Box–Muller). */
  normal(out: Float32Array | Float64Array, mean = 0, std = 1): void {
    for (let i = 0; i < out.length; i += 2) {
      const u = 1 - this.uniform();
      const r = Math.sqrt(-2 * Math.log(u));
      const theta = 2 * Math.PI * this.uniform();
      out[i] = mean + std * r * Math.cos(theta);
      if (i + 1 < out.length) out[i + 1] = mean + std * r * Math.sin(theta);
    }
  }
}
