{
  "targets": [
    {
      "target_name": "pdb_kernels",
      "sources": ["src/addon.cc", "src/matmul.cc", "src/rmsnorm.cc", "src/parallel.cc", "src/peak.cc",
                  "src/fmath_array.cc", "src/attention.cc", "src/indexer.cc", "src/pool.cc", "src/rope_rows.cc", "src/round_bf16.cc", "src/hc_post.cc",
                  "src/entry_fmath.cc", "src/entry_attention.cc", "src/entry_pool.cc", "src/entry_rope.cc", "src/entry_round.cc", "src/entry_hc.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-O2"],
      "cflags": ["-O3", "-ffp-contract=off", "-fno-fast-math", "-mavx2", "-mf16c"],
      "cflags_cc": ["-std=c++17", "-O3", "-ffp-contract=off", "-fno-fast-math", "-mavx2", "-mf16c"]
    }
  ]
}
