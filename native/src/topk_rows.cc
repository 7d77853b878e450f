#include "topk_rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "parallel.h"

namespace pdb {

void topk_rows (const float* scores, size_t rows, size_t stride, const int32_t* lengths, size_t k,
                int32_t* indices, int32_t* counts, int threads) {
  parallel_ranges(rows, 1, threads, [&](size_t r0, size_t r1) {
    std::vector<int32_t> kept;
    kept.reserve(stride);
    for (size_t r = r0; r < r1; r++) {
      const float* s = scores + r * stride;
      const size_t length = size_t(lengths[r]);
      const size_t keep = std::min(k, length);
      kept.clear();
      for (size_t i = 0; i < length; i++) {
        if (s[i] > -INFINITY) kept.push_back(int32_t(i));  // not -Inf, not NaN
      }
      if (kept.size() > keep) {
        auto better = [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
        std::nth_element(kept.begin(), kept.begin() + keep, kept.end(), better);
        kept.resize(keep);
        std::sort(kept.begin(), kept.end());
      }
      int32_t* out = indices + r * k;
      std::copy(kept.begin(), kept.end(), out);
      std::fill(out + kept.size(), out + k, -1);
      counts[r] = int32_t(kept.size());
    }
  });
}

}  // namespace pdb
