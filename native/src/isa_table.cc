// This ISA's KernelTable (isa.h), compiled once per ISA like the kernels it lists.
#include "isa.h"
#include "isa_kernels.h"

namespace pdb {
namespace PDB_ISA_NS {

#define PDB_STR2(x) #x
#define PDB_STR(x) PDB_STR2(x)

extern const KernelTable kKernelTable;
const KernelTable kKernelTable = {
  PDB_STR(PDB_ISA_NS), matmul_f32, matmul_bf16, rms_norm, fmath_array, attention_mqa, indexer_scores,
  softmax_pool, rope_rows, round_bf16_array, peak_mul_add_loop, peak_copy,
};

}  // namespace PDB_ISA_NS
}  // namespace pdb
