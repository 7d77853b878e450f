// mx.power on float32 is std::pow(float, float), i.e. glibc's powf. Ours rounds a double pow once
// to float32. glibc powf is not correctly rounded (0.54 ulp worst case): the two agree on every
// exponent arange(0, dims, 2)/dims that DeepseekV4RoPE uses for dims 32 … 256 with bases 1e4 and
// 1.6e5, but on 99.93 % of random exponents only (harness/mlx/probes/probe_cache_path.py).
import { fround } from './f32.ts'

/** powf(base, exponent) as far as the probes reach (see above). */
export function mlxPowF32 (base: number, exponent: number): number {
  return fround(Math.pow(fround(base), fround(exponent)))
}
