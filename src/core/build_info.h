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

}  // namespace hymba
