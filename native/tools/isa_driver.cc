// A standalone driver for one ISA variant of the kernels (no Node): seeded cases with special values
// through every kernel, each output buffer written to OUT_DIR/<case>.bin, so the same cases can be
// hashed on other machines and compared (native/tools/isa-crosscheck.sh builds it for x86 AVX2,
// x86 portable and aarch64 portable, runs the aarch64 one under qemu, and compares the SHA-256s).
// Build (from the repository root), one of:
//   g++ -std=c++17 -O3 -ffp-contract=off -fno-fast-math -DPDB_ISA_PORTABLE -Inative/src \
//       native/tools/isa_driver.cc <the ISA sources of binding.gyp> native/src/parallel.cc native/src/hc_post.cc -pthread
//   (-DPDB_ISA_AVX2 -mavx2 -mf16c for the AVX2 variant; aarch64-linux-gnu-g++ for arm64)
// Run: isa_driver OUT_DIR   (prints the ISA and the number of cases)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "hc_post.h"
#include "isa_kernels.h"
#include "pack_strips.h"
#include "parallel.h"

namespace {

namespace isa = pdb::PDB_ISA_NS;

// mulberry32, as suites/kernels/fixtures.ts.
uint32_t g_seed = 0x9e3779b9u;
double rnd () {
  g_seed += 0x6d2b79f5u;
  uint32_t t = g_seed;
  t = (t ^ (t >> 15)) * (t | 1u);
  t ^= t + (t ^ (t >> 7)) * (t | 61u);
  return double(t ^ (t >> 14)) / 4294967296.0;
}

const uint32_t kSpecialBits[] = { 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7f800000u, 0xff800000u,
  0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x00400000u, 0x807fffffu, 0x007fffffu, 0x00800000u,
  0x7f7fffffu, 0xff7fffffu, 0x3f808000u, 0x3f818000u, 0x7149f2cau, 0xf149f2cau, 0x3f800000u, 0xbf800000u };
constexpr size_t kSpecials = sizeof kSpecialBits / sizeof kSpecialBits[0];

float from_bits (uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Uniform in [-scale, scale); every `every`-th value a special bit pattern, only in every third row
// of `row_len` values when row_len > 0.
std::vector<float> data (size_t n, float scale = 1.0f, size_t every = 9, size_t row_len = 0) {
  std::vector<float> a(n);
  for (size_t i = 0; i < n; i++) {
    if (every > 0 && i % every == every - 1 && (row_len == 0 || (i / row_len) % 3 == 0)) {
      a[i] = from_bits(kSpecialBits[size_t(rnd() * double(kSpecials))]);
    } else {
      a[i] = float((rnd() * 2.0 - 1.0) * double(scale));
    }
  }
  return a;
}

std::vector<float> bits_data (size_t n) {
  std::vector<float> a(n);
  for (size_t i = 0; i < n; i++) a[i] = from_bits(uint32_t(rnd() * 4294967296.0));
  return a;
}

std::vector<int32_t> ints (size_t n, size_t max) {
  std::vector<int32_t> a(n);
  for (size_t i = 0; i < n; i++) a[i] = int32_t(rnd() * double(max));
  return a;
}

std::string g_dir;
int g_cases = 0;

void record (const std::string& name, const float* out, size_t n) {
  const std::string path = g_dir + "/" + name + ".bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(out, sizeof(float), n, f) != n || std::fclose(f) != 0) {
    std::fprintf(stderr, "isa_driver: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  g_cases++;
}

std::string dims (std::initializer_list<size_t> v) {
  std::string s;
  for (size_t x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

void run_all (int threads) {
  const std::string t = "t" + std::to_string(threads);
  struct Mm { size_t m, k, n, every; };
  for (const Mm c : { Mm{5, 300, 19, 11}, Mm{1, 9, 7, 0}, Mm{2, 131, 9, 5}, Mm{64, 512, 64, 0}, Mm{9, 203, 23, 13},
                      Mm{17, 1100, 37, 0} }) {
    const auto x = data(c.m * c.k, 2.0f, c.every, c.k);
    const auto w = data(c.n * c.k, 1.0f, c.every, c.k);
    const auto wb = data(c.n * c.k, 1.0f, c.every, c.k);
    std::vector<uint16_t> codes(c.n * c.k);
    for (size_t i = 0; i < codes.size(); i++) {
      uint32_t b;
      std::memcpy(&b, &wb[i], 4);
      codes[i] = c.every > 0 && (i / c.k) % 3 == 1 && i % 17 == 0 ? uint16_t(rnd() * 65536.0) : uint16_t(b >> 16);
    }
    std::vector<float> y(c.m * c.n);
    const std::pair<pdb::MatmulOrder, const char*> orders[] = {
      {pdb::MatmulOrder::kLanes8, ".lanes8"}, {pdb::MatmulOrder::kBlocks128, ".blocks128"}, {pdb::MatmulOrder::kLanes8Fma, ".lanes8-fma"},
      {pdb::MatmulOrder::kSequentialFma, ".sequential-fma"} };
    for (const auto& [order, order_name] : orders) {
      for (bool bf : { false, true }) {
        const std::string tag = t + "." + dims({c.m, c.k, c.n}) + order_name + (bf ? ".bf16out" : "");
        isa::matmul_f32(x.data(), c.m, c.k, w.data(), c.n, y.data(), bf, order, threads);
        record("matmulF32." + tag, y.data(), y.size());
        isa::matmul_bf16(x.data(), c.m, c.k, codes.data(), c.n, y.data(), bf, order, threads);
        record("matmulBf16." + tag, y.data(), y.size());
      }
    }
    // The sequential-fma order over W packed once in strips of 16 rows (pack_strips.h).
    const size_t rows16 = (c.n + 15) / 16 * 16;
    std::vector<float> wp(rows16 * c.k);
    std::vector<uint16_t> cp(rows16 * c.k);
    pdb::pack_strips_whole(w.data(), c.n, c.k, wp.data());
    pdb::pack_strips_whole(codes.data(), c.n, c.k, cp.data());
    for (bool bf : { false, true }) {
      const std::string tag = t + "." + dims({c.m, c.k, c.n}) + ".sequential-fma-packed" + (bf ? ".bf16out" : "");
      isa::matmul_f32(x.data(), c.m, c.k, wp.data(), c.n, y.data(), bf, pdb::MatmulOrder::kSequentialFmaPacked, threads);
      record("matmulF32." + tag, y.data(), y.size());
      isa::matmul_bf16(x.data(), c.m, c.k, cp.data(), c.n, y.data(), bf, pdb::MatmulOrder::kSequentialFmaPacked, threads);
      record("matmulBf16." + tag, y.data(), y.size());
    }
  }
  struct Rn { size_t rows, d; float eps; };
  for (const Rn c : { Rn{7, 333, 1e-6f}, Rn{3, 8, 0.0f}, Rn{2, 1, 1e-5f} }) {
    auto x = data(c.rows * c.d, 3.0f, 13, c.d);
    for (size_t i = 0; i < c.d; i++) x[i] = 0.0f;
    if (c.rows > 1) for (size_t i = 0; i < c.d; i++) x[c.d + i] = (i % 2 ? -1.0f : 1.0f) * 3e38f;
    if (c.rows > 2) for (size_t i = 0; i < c.d; i++) x[2 * c.d + i] = float(double(i + 1) * 1e-42);
    const auto weight = data(c.d, 2.0f, 7);
    std::vector<float> y(c.rows * c.d);
    isa::rms_norm(x.data(), c.rows, c.d, weight.data(), c.eps, y.data(), threads);
    record("rmsNorm." + t + "." + dims({c.rows, c.d}), y.data(), y.size());
  }
  const std::vector<float> edges = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.72284f, -104.0f, -103.99999f,
    -120.0f, -87.33655f, -64.0f, -64.00001f, 20.0f, 20.000002f, -20.0f, -80.0f, 80.0f, 1.0f, -1.0f, -0.99999994f,
    5.9604645e-8f, -5.9604645e-8f, 1e-45f, -1e-45f };
  const std::vector<float> bits = bits_data(4099), busy = data(4099, 100.0f, 0);
  const std::pair<const char*, const std::vector<float>*> fm_inputs[] = { {"bits", &bits}, {"busy", &busy}, {"edges", &edges} };
  for (const auto& in : fm_inputs) {
    std::vector<float> y(in.second->size());
    for (int code = 0; code < 7; code++) {
      isa::fmath_array(pdb::FmathFn(code), in.second->data(), y.size(), y.data(), threads);
      record("fmathArray." + t + "." + std::to_string(code) + "." + in.first, y.data(), y.size());
    }
  }
  struct At { size_t T, H, D, N, every; };
  for (const At c : { At{5, 3, 70, 50, 0}, At{4, 2, 45, 20, 17}, At{1, 4, 8, 3, 0} }) {
    const auto q = data(c.T * c.H * c.D, 1.0f, c.every, c.D);
    const auto kv = data(c.N * c.D, 1.0f, c.every, c.D);
    std::vector<int32_t> offsets(c.T + 1, 0);
    for (size_t i = 0; i < c.T; i++) offsets[i + 1] = offsets[i] + 1 + int32_t(rnd() * 40.0);
    auto keys = ints(size_t(offsets[c.T]), c.N);
    if (c.every) {
      for (size_t i = 1; i < c.T; i += 2)
        for (int32_t j = offsets[i]; j < offsets[i + 1]; j++) if (keys[size_t(j)] % 3 == 0) keys[size_t(j)] += 1;
    }
    const auto sinks = data(c.H, 2.0f, c.every ? 3 : 0);
    std::vector<float> out(c.T * c.H * c.D);
    for (int flags = 0; flags < 8; flags++) {
      pdb::AttentionOptions o;
      o.round_scores_bf16 = flags & 1;
      o.round_probs_bf16 = flags & 2;
      o.round_out_bf16 = flags & 4;
      isa::attention_mqa(q.data(), c.T, c.H, c.D, kv.data(), c.N, offsets.data(), keys.data(), sinks.data(), 0.125f, o,
                         out.data(), threads);
      record("attentionMqa." + t + "." + dims({c.T, c.H, c.D, c.N}) + ".f" + std::to_string(flags), out.data(), out.size());
    }
  }
  struct Ix { size_t T, Hi, Di, N, every; };
  for (const Ix c : { Ix{11, 4, 33, 77, 0}, Ix{9, 3, 16, 20, 7} }) {
    const auto visible = ints(c.T, c.N + 1);
    const auto q = data(c.T * c.Hi * c.Di, 1.0f, c.every, c.Di);
    const auto entries = data(c.N * c.Di, 1.0f, c.every, c.Di);
    const auto weights = data(c.T * c.Hi, 1.0f, c.every, c.Hi);
    std::vector<float> out(c.T * c.N);
    isa::indexer_scores(q.data(), c.T, c.Hi, c.Di, entries.data(), c.N, weights.data(), visible.data(), 0.5f, 0.25f,
                        out.data(), threads);
    record("indexerScores." + t + "." + dims({c.T, c.Hi, c.Di, c.N}), out.data(), out.size());
  }
  struct Pl { size_t W, rows, d, every; };
  for (const Pl c : { Pl{3, 5, 83, 0}, Pl{2, 4, 17, 6} }) {
    auto gate = data(c.W * c.rows * c.d, 4.0f, c.every, c.d);
    for (size_t i = 0; i < gate.size(); i += 23) gate[i] = -INFINITY;
    const auto kv = data(c.W * c.rows * c.d, 1.0f, c.every, c.d);
    std::vector<float> out(c.W * c.d);
    for (int flags = 0; flags < 8; flags++) {
      pdb::PoolOptions o;
      o.round_weights_bf16 = flags & 1;
      o.round_products_bf16 = flags & 2;
      o.round_out_bf16 = flags & 4;
      isa::softmax_pool(kv.data(), gate.data(), c.W, c.rows, c.d, o, out.data(), threads);
      record("softmaxPool." + t + "." + dims({c.W, c.rows, c.d}) + ".f" + std::to_string(flags), out.data(), out.size());
    }
  }
  for (bool inverse : { false, true }) {
    const size_t rows = 6, heads = 2, head_dim = 40, offset = 4, rope_dim = 34, table_rows = 9;
    auto x = data(rows * heads * head_dim, 3.0f, 10);
    const auto cos = data(table_rows * rope_dim / 2, 1.0f, 15);
    const auto sin = data(table_rows * rope_dim / 2, 1.0f, 15);
    const auto tr = ints(rows, table_rows);
    isa::rope_rows(x.data(), rows, heads, head_dim, offset, rope_dim, cos.data(), sin.data(), tr.data(), inverse, threads);
    record("ropeRows." + t + (inverse ? ".inverse" : ".forward"), x.data(), x.size());
  }
  {
    auto r = bits_data(4099);
    for (size_t i = 5; i < r.size(); i += 8) {
      uint32_t b;
      std::memcpy(&b, &r[i], 4);
      b = (b & 0xffff0000u) | 0x8000u;
      std::memcpy(&r[i], &b, 4);
    }
    isa::round_bf16_array(r.data(), r.size(), threads);
    record("roundBf16Array." + t, r.data(), r.size());
  }
  for (bool bf : { false, true }) {
    const size_t n = 3, hc = 4, hidden = 37;
    const auto h = data(n * hc * hidden, 2.0f, 11), post = data(n * hc, 1.0f, 0), comb = data(n * hc * hc, 1.0f, 0);
    const auto sub = data(n * hidden, 2.0f, 11);
    std::vector<float> out(n * hc * hidden);
    pdb::hc_post(h.data(), n, post.data(), comb.data(), sub.data(), hc, hidden, bf, out.data(), threads);
    record("hcPost." + t + (bf ? ".bf16" : ".f32"), out.data(), out.size());
  }
  // The peak loop's result is arithmetic too (the same bits on every ISA).
  float peak = isa::peak_mul_add_loop(1000, 1.0000001f, 1e-7f);
  record("peakMulAddLoop." + t, &peak, 1);
}

}  // namespace

#define PDB_DRIVER_STR2(x) #x
#define PDB_DRIVER_STR(x) PDB_DRIVER_STR2(x)

int main (int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: isa_driver OUT_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  for (int threads : { 1, 2 }) run_all(threads);
  std::printf("isa_driver: isa %s, %d cases written to %s\n", PDB_DRIVER_STR(PDB_ISA_NS), g_cases, g_dir.c_str());
  return 0;
}
