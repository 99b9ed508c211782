#include "core/build_info.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>

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
  b.blas_core_choice = openblas_core_choice();
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
          {"blas_core_choice", b.blas_core_choice},
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
  // AVX2 cores it picks for AVX-512 CPUs it does not know (Zen 4 and 5).
  static const char* const kAvx2[] = {"Haswell", "Zen"};
  auto among = [&](const auto& names) {
    return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return chosen == n; });
  };
  const bool generic = among(kGeneric), avx2 = among(kAvx2);
  // The best a CPU with AVX-512 can run: SkylakeX's kernels, and Cooperlake's
  // (the same plus sbgemm on AVX512-BF16) where it has BF16.
  const std::string avx512_core = cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (cpu.avx512 && (generic || avx2 || (chosen == "SkylakeX" && cpu.avx512_bf16))) return avx512_core;
  if (generic && cpu.avx2_fma) return "Haswell";
  return "";  // a core that uses what the CPU has (or an unknown name) stands
}

CpuVectorFeatures cpu_vector_features_here() {
  CpuVectorFeatures cpu;
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512cd");
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16");
  return cpu;
}

std::string openblas_core_choice() {
  if (const char* replaced = std::getenv(kReplacedCoreVariable); replaced != nullptr && *replaced != '\0')
    return std::string("chosen by hymba from the CPU's flags, in place of OpenBLAS's ") + replaced;
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    // A setting kept from older OpenBLAS builds can hold this one below the CPU.
    const std::string better = better_openblas_core_here();
    if (better.empty()) return "OPENBLAS_CORETYPE";
    return "OPENBLAS_CORETYPE; this CPU can run " + better + " (unset it to let hymba choose)";
  }
  return "OpenBLAS's own";
}

std::string openblas_core_here() {
  const char* chosen = openblas_get_corename();
  return chosen != nullptr ? chosen : "";
}

std::string better_openblas_core_here() { return better_openblas_core(openblas_core_here(), cpu_vector_features_here()); }

}  // namespace hymba
