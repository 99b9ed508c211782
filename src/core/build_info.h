// Facts about this build and machine, for `hymba info` and benchmark logs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hymba {

struct BuildInfo {
  std::string version;
  std::string build_type;
  std::string compiler;
  std::string blas;      // OpenBLAS configuration string
  std::string blas_core;  // the kernels OpenBLAS runs (openblas_get_corename)
  std::string blas_core_choice;  // who chose them (openblas_core_choice)
  int threads = 1;       // kernels' OpenMP thread count
  int hardware_threads = 1;
  std::string omp_wait_policy;  // OMP_WAIT_POLICY as the process runs ("" = OpenMP's default)
  bool cuda_built = false;
  std::string cuda_devices;  // description, or why there is none
  bool python_bindings = false;  // the Python package (python/, docs/python.md) is in this build
};

BuildInfo build_info();
nlohmann::json to_json(const BuildInfo& info);

// Implemented by src/kernels/cuda when built with HYMBA_CUDA; otherwise it
// reports that CUDA is not built.
std::string cuda_device_summary();

// OpenBLAS picks its kernels by CPU model, and 0.3.21 (Debian 12) does not
// know every CPU it meets: it falls back to generic SSE kernels
// ("Prescott") on Intel Xeons of model 207 with AVX-512 (float32 prefill ran
// 3x slower), and to its AVX2 kernels ("Haswell", "Zen") on AMD Zen 4 / 5
// with AVX-512 (seed-scale training ran 1.49x slower). Given the core
// OpenBLAS chose and what this CPU has, the core to ask for instead through
// OPENBLAS_CORETYPE, or "" when its choice stands:
// - AVX-512 F/BW/VL/DQ/CD: "SkylakeX", or "Cooperlake" (SkylakeX's kernels
//   plus sbgemm) with AVX512-BF16, in place of a generic or AVX2 core (and
//   of SkylakeX on a CPU with BF16);
// - AVX2 and FMA: "Haswell" in place of a generic core.
struct CpuVectorFeatures {
  bool avx512 = false;  // F, BW, VL, DQ and CD
  bool avx2_fma = false;
  bool avx512_bf16 = false;
};
CpuVectorFeatures cpu_vector_features_here();
std::string better_openblas_core(const std::string& chosen, const CpuVectorFeatures& cpu);
// The core this process's OpenBLAS runs, and the better one for this CPU.
std::string openblas_core_here();
std::string better_openblas_core_here();
// The variable the command line sets to the core OpenBLAS picked when it
// asks for another one and starts over (cli/main.cpp).
inline constexpr const char* kReplacedCoreVariable = "HYMBA_OPENBLAS_REPLACED_CORE";
// Who chose the kernels OpenBLAS runs: hymba (naming the core it replaced),
// the user's OPENBLAS_CORETYPE, or OpenBLAS itself (`hymba info`).
std::string openblas_core_choice();

}  // namespace hymba
