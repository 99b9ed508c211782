#include "core/build_info.h"

#include <cstdlib>

#include <cblas.h>

#include "core/threading.h"

namespace hymba {

BuildInfo build_info() {
  BuildInfo b;
  b.version = HYMBA_VERSION;
#ifdef NDEBUG
  b.build_type = "release";
#else
  b.build_type = "debug";
#endif
#if defined(__clang__)
  b.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  b.compiler = "gcc " __VERSION__;
#endif
  b.blas = openblas_get_config();
  b.threads = num_threads();
  b.hardware_threads = max_hardware_threads();
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  b.omp_wait_policy = wait ? wait : "";
#ifdef HYMBA_WITH_CUDA
  b.cuda_built = true;
#endif
  b.cuda_devices = cuda_device_summary();
#ifdef HYMBA_WITH_PYTHON
  b.python_bindings = true;
#endif
  return b;
}

nlohmann::json to_json(const BuildInfo& b) {
  return {{"version", b.version},   {"build_type", b.build_type}, {"compiler", b.compiler},
          {"blas", b.blas},         {"threads", b.threads},       {"hardware_threads", b.hardware_threads}, {"omp_wait_policy", b.omp_wait_policy},
          {"cuda_built", b.cuda_built}, {"cuda_devices", b.cuda_devices},
          {"python_bindings", b.python_bindings}};
}

#ifndef HYMBA_WITH_CUDA
std::string cuda_device_summary() { return "not built (configure with --preset cuda)"; }
#endif

}  // namespace hymba
