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
  if (const char* core = openblas_get_corename(); core != nullptr) b.blas_core = core;
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
  return {{"version", b.version},
          {"build_type", b.build_type},
          {"compiler", b.compiler},
          {"blas", b.blas},
          {"blas_core", b.blas_core},
          {"threads", b.threads},
          {"hardware_threads", b.hardware_threads},
          {"omp_wait_policy", b.omp_wait_policy},
          {"cuda_built", b.cuda_built}, {"cuda_devices", b.cuda_devices},
          {"python_bindings", b.python_bindings}};
}

#ifndef HYMBA_WITH_CUDA
std::string cuda_device_summary() { return "not built (configure with --preset cuda)"; }
#endif

std::string better_openblas_core(const std::string& chosen, const CpuVectorFeatures& cpu) {
  // OpenBLAS's generic cores for CPUs it does not recognise, and the older
  // ones it may settle on for them: none uses AVX2.
  static const char* const kGeneric[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                         "Atom",     "Barcelona", "Sandybridge"};
  bool generic = false;
  for (const char* g : kGeneric) generic = generic || chosen == g;
  if (!generic) return "";  // a core OpenBLAS knows (Haswell, Zen, SkylakeX...) stands
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return "";
}

CpuVectorFeatures cpu_vector_features_here() {
  CpuVectorFeatures cpu;
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512cd");
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return cpu;
}

std::string better_openblas_core_here() {
  const char* chosen = openblas_get_corename();
  return better_openblas_core(chosen != nullptr ? chosen : "", cpu_vector_features_here());
}

}  // namespace hymba
