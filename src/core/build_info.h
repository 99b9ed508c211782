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

// OpenBLAS picks its kernels by CPU model and falls back to generic SSE ones
// ("Prescott") for a model it does not know: 0.3.21 (Debian 12) does so on
// Intel Xeons of model 207 that have AVX-512, and float32 prefill ran 3x
// slower. Given the core OpenBLAS chose and what this CPU has, the core to
// ask for instead through OPENBLAS_CORETYPE ("SkylakeX" with AVX-512
// F/BW/VL/DQ/CD, "Haswell" with AVX2 and FMA), or "" when its choice stands.
struct CpuVectorFeatures {
  bool avx512 = false;  // F, BW, VL, DQ and CD
  bool avx2_fma = false;
};
CpuVectorFeatures cpu_vector_features_here();
std::string better_openblas_core(const std::string& chosen, const CpuVectorFeatures& cpu);
// The same for this process's OpenBLAS and CPU.
std::string better_openblas_core_here();

}  // namespace hymba
