# pdb_kernels: the addon (bindings, threads, dispatch; no ISA flags) and the vector kernels, compiled
# once per ISA into static libraries (docs/kernels.md, "Portable build and ISA dispatch"):
#   pdb_kernels_portable  -DPDB_ISA_PORTABLE, no ISA flags (every target_arch; the only one off x86)
#   pdb_kernels_avx2      -DPDB_ISA_AVX2 -mavx2 -mf16c -mfma (target_arch x64 only)
#   pdb_kernels_avx512    -DPDB_ISA_AVX512, the avx2 flags and -mavx512f -mavx512dq -mavx512bw -mavx512vl (x64 only)
# Both use the same numerics flags: -O3 -ffp-contract=off -fno-fast-math; no fast-math mode and no host-specific -march, ever (docs/kernels.md).
{
  "variables": {
    "pdb_isa_sources": ["src/matmul.cc", "src/rmsnorm.cc", "src/peak_loops.cc", "src/fmath_array.cc", "src/attention.cc",
                        "src/indexer.cc", "src/pool.cc", "src/rope_rows.cc", "src/round_bf16.cc", "src/isa_table.cc", "src/mlx_cpu_isa.cc"],
    "pdb_flags": ["-O3", "-ffp-contract=off", "-fno-fast-math"],
    "pdb_cc_flags": ["-std=c++17", "-O3", "-ffp-contract=off", "-fno-fast-math"]
  },
  "target_defaults": {
    "conditions": [
      ["target_arch=='x64'", { "defines": ["PDB_HAVE_AVX2"] }]
    ]
  },
  "targets": [
    {
      "target_name": "pdb_kernels",
      "sources": ["src/addon.cc", "src/dispatch.cc", "src/parallel.cc", "src/thread_pool.cc", "src/peak.cc", "src/hc_post.cc", "src/hc_collapse.cc",
                  "src/unweighted_norm.cc", "src/topk_rows.cc", "src/mx_round_trip.cc", "src/bf16_arrays.cc",
                  "src/entry_fmath.cc", "src/entry_attention.cc", "src/entry_pool.cc", "src/entry_rope.cc", "src/entry_round.cc", "src/entry_hc.cc",
                  "src/entry_norm.cc", "src/entry_topk.cc", "src/entry_mx.cc", "src/entry_bf16.cc", "src/mlx_cpu.cc", "src/mlx_cpu_pool.cc", "src/mlx_cpu_rope.cc",
                  "src/entry_mlx_cpu.cc", "src/matmul_grouped.cc", "src/entry_grouped.cc", "src/moe_experts.cc", "src/entry_moe.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_CPP_EXCEPTIONS"],
      "dependencies": ["pdb_kernels_portable"],
      "conditions": [
        ["target_arch=='x64'", { "dependencies": ["pdb_kernels_avx2", "pdb_kernels_avx512"] }]
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-O2"],
      "cflags": ["<@(pdb_flags)"],
      "cflags_cc": ["<@(pdb_cc_flags)"],
      "xcode_settings": { "GCC_OPTIMIZATION_LEVEL": "3", "CLANG_CXX_LANGUAGE_STANDARD": "c++17", "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
                            "OTHER_CFLAGS": ["-ffp-contract=off", "-fno-fast-math"], "OTHER_CPLUSPLUSFLAGS": ["-ffp-contract=off", "-fno-fast-math"] }
    },
    {
      "target_name": "pdb_kernels_portable",
      "type": "static_library",
      "sources": ["<@(pdb_isa_sources)"],
      "defines": ["PDB_ISA_PORTABLE"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-O2"],
      "cflags": ["-fPIC", "<@(pdb_flags)"],
      "cflags_cc": ["<@(pdb_cc_flags)"],
      "xcode_settings": { "GCC_OPTIMIZATION_LEVEL": "3", "CLANG_CXX_LANGUAGE_STANDARD": "c++17", "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
                            "OTHER_CFLAGS": ["-ffp-contract=off", "-fno-fast-math"], "OTHER_CPLUSPLUSFLAGS": ["-ffp-contract=off", "-fno-fast-math"] }
    }
  ],
  "conditions": [
    ["target_arch=='x64'", {
      "targets": [
        {
          "target_name": "pdb_kernels_avx2",
          "type": "static_library",
          "sources": ["<@(pdb_isa_sources)"],
          "defines": ["PDB_ISA_AVX2"],
          "cflags!": ["-fno-exceptions"],
          "cflags_cc!": ["-fno-exceptions", "-O2"],
          "cflags": ["-fPIC", "<@(pdb_flags)", "-mavx2", "-mf16c", "-mfma"],
          "cflags_cc": ["<@(pdb_cc_flags)"],
          "xcode_settings": { "GCC_OPTIMIZATION_LEVEL": "3", "CLANG_CXX_LANGUAGE_STANDARD": "c++17", "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
                            "OTHER_CFLAGS": ["-ffp-contract=off", "-fno-fast-math", "-mavx2", "-mf16c", "-mfma"], "OTHER_CPLUSPLUSFLAGS": ["-ffp-contract=off", "-fno-fast-math", "-mavx2", "-mf16c", "-mfma"] }
        },
        {
          "target_name": "pdb_kernels_avx512",
          "type": "static_library",
          "sources": ["<@(pdb_isa_sources)"],
          "defines": ["PDB_ISA_AVX512"],
          "cflags!": ["-fno-exceptions"],
          "cflags_cc!": ["-fno-exceptions", "-O2"],
          "cflags": ["-fPIC", "<@(pdb_flags)", "-mavx2", "-mf16c", "-mfma", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl"],
          "cflags_cc": ["<@(pdb_cc_flags)"],
          "xcode_settings": { "GCC_OPTIMIZATION_LEVEL": "3", "CLANG_CXX_LANGUAGE_STANDARD": "c++17", "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
                            "OTHER_CFLAGS": ["-ffp-contract=off", "-fno-fast-math", "-mavx2", "-mf16c", "-mfma", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl"], "OTHER_CPLUSPLUSFLAGS": ["-ffp-contract=off", "-fno-fast-math", "-mavx2", "-mf16c", "-mfma", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl"] }
        }
      ]
    }]
  ]
}
