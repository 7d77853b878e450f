// matmul_grouped.h. The groups' output columns, in grains of 8, are laid end to end (groups with
// rows only) and split between threads as one range; each thread computes its piece of each group
// it meets with one single-threaded matmul_bf16 on those rows of W, into a scratch [m, piece] that
// is copied into the group's y. One hand-over to the threads per call: a batched decode step's
// experts each see 1 to 4 rows, and one call per expert paid the hand-over per expert.
#include "matmul_grouped.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "parallel.h"

namespace pdb {

namespace {

constexpr size_t kColumnGrain = 8;

struct GroupedCall {
  const MatmulGroupBf16* groups;
  const size_t* first_unit;  // per group: its first grain in the laid-out range; [count] = total
  size_t count, k, n;
  bool round_bf16;
  MatmulOrder order;
};

void run_units (const void* context, size_t u0, size_t u1) {
  const auto& c = *static_cast<const GroupedCall*>(context);
  std::vector<float> scratch;
  size_t g = std::upper_bound(c.first_unit, c.first_unit + c.count + 1, u0) - c.first_unit - 1;
  for (; g < c.count && c.first_unit[g] < u1; g++) {
    const MatmulGroupBf16& grp = c.groups[g];
    if (grp.m == 0) continue;
    const size_t a = std::max(u0, c.first_unit[g]) - c.first_unit[g];
    const size_t b = std::min(u1, c.first_unit[g + 1]) - c.first_unit[g];
    const size_t j0 = a * kColumnGrain;
    const size_t j1 = std::min(b * kColumnGrain, c.n);
    if (j0 >= j1) continue;
    const size_t width = j1 - j0;
    scratch.resize(grp.m * width);
    matmul_bf16(grp.x, grp.m, c.k, grp.w + j0 * c.k, width, scratch.data(), c.round_bf16, c.order, 1);
    for (size_t i = 0; i < grp.m; i++) std::memcpy(grp.y + i * c.n + j0, scratch.data() + i * width, width * sizeof(float));
  }
}

}  // namespace

void matmul_bf16_grouped (const MatmulGroupBf16* groups, size_t count, size_t k, size_t n, bool round_bf16,
                          MatmulOrder order, int threads) {
  if (count == 0 || n == 0) return;
  const size_t grains = (n + kColumnGrain - 1) / kColumnGrain;
  std::vector<size_t> first_unit(count + 1);
  for (size_t g = 0; g < count; g++) first_unit[g + 1] = first_unit[g] + (groups[g].m == 0 ? 0 : grains);
  const GroupedCall call{groups, first_unit.data(), count, k, n, round_bf16, order};
  if (first_unit[count] == 0) return;
  parallel_ranges_raw(first_unit[count], 1, threads, run_units, &call);
}

}  // namespace pdb
