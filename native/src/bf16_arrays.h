// Whole-buffer bf16 conversions of weight loading (src/model/weights/formats.ts); their
// references are src/numerics/bf16.ts decodeBf16 and exactBf16Codes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

// out[i] = the float32 whose bits are codes[i] << 16 (exact). Threads split the range.
void decode_bf16_array (const uint16_t* codes, size_t length, float* out, int threads);

// The bf16 code of every value when each one is exactly a bf16 value (low 16 bits zero, the code
// its top half; any other NaN becomes 0x7fc0 with its sign) and true; false as soon as one is not
// (out then holds no result).
// The answer is one flag over the whole range, so the thread count cannot change it.
bool exact_bf16_codes (const float* values, size_t length, uint16_t* out, int threads);

}  // namespace pdb
