// CUDA device discovery for `hymba info` (built only with HYMBA_CUDA=ON).
#include <cuda_runtime.h>

#include <string>

#include "core/build_info.h"

namespace hymba {

std::string cuda_device_summary() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("built, but no usable device: ") + cudaGetErrorString(err);
  if (count == 0) return "built, no device found";
  std::string out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, i);
    if (!out.empty()) out += "; ";
    out += std::to_string(i) + ": " + prop.name + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
           ", " + std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
  }
  return out;
}

}  // namespace hymba
