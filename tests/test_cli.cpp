#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/build_info.h"
#include "test_util.h"

namespace hymba {
namespace {

using test::run_cli;

TEST(Cli, InfoPrintsBuildFacts) {
  auto r = run_cli("info");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BLAS"), std::string::npos);
  EXPECT_NE(r.output.find("threads"), std::string::npos);
}

TEST(Cli, InfoJsonParses) {
  auto r = run_cli("--threads 1 info --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["build"]["threads"], 1);
  EXPECT_TRUE(j["build"]["blas"].get<std::string>().find("OpenBLAS") != std::string::npos);
}

// Spinning OpenMP waits are ruinous on shared cores, so hymba runs with
// passive waits unless the user chose a policy.
TEST(Cli, OpenMpWaitPolicyDefaultsToPassiveButRespectsTheUser) {
  auto policy = [](const std::string& env) {
    const auto r = run_cli("--threads 1 info --json", env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output)["build"]["omp_wait_policy"].get<std::string>();
  };
  EXPECT_EQ(policy("env -u OMP_WAIT_POLICY"), "passive");
  EXPECT_EQ(policy("env OMP_WAIT_POLICY=active"), "active");
}

// OpenBLAS 0.3.21 runs generic SSE kernels on CPUs it does not know
// (an AVX-512 Xeon of model 207 among them): hymba then asks for the kernels
// the CPU can run, and leaves a user's OPENBLAS_CORETYPE alone.
TEST(Cli, OpenBlasRunsKernelsForThisCpuButRespectsTheUser) {
  auto core = [](const std::string& env) {
    const auto r = run_cli("--threads 1 info --json", env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output)["build"]["blas_core"].get<std::string>();
  };
  const std::string chosen = core("env -u OPENBLAS_CORETYPE");
  EXPECT_FALSE(chosen.empty());
  EXPECT_EQ(better_openblas_core(chosen, cpu_vector_features_here()), "") << chosen;
  EXPECT_EQ(core("env OPENBLAS_CORETYPE=Prescott"), "Prescott");
  // `hymba info` says who chose: the user (and what the CPU could run
  // instead), hymba (naming the core it replaced), or OpenBLAS.
  const auto user = nlohmann::json::parse(run_cli("--threads 1 info --json", "env OPENBLAS_CORETYPE=Prescott").output);
  const std::string better = better_openblas_core("Prescott", cpu_vector_features_here());
  EXPECT_EQ(user["build"]["blas_core_choice"],
            better.empty() ? "OPENBLAS_CORETYPE"
                           : "OPENBLAS_CORETYPE; this CPU can run " + better + " (unset it to let hymba choose)");
  const auto own = nlohmann::json::parse(run_cli("--threads 1 info --json", "env -u OPENBLAS_CORETYPE").output);
  const std::string choice = own["build"]["blas_core_choice"], prefix = "chosen by hymba from the CPU's flags, in place of OpenBLAS's ";
  if (choice != "OpenBLAS's own") {
    ASSERT_EQ(choice.rfind(prefix, 0), 0u) << choice;
    EXPECT_EQ(better_openblas_core(choice.substr(prefix.size()), cpu_vector_features_here()), own["build"]["blas_core"]);
  }
}

// `hymba info` says whether bf16 training runs here (AVX512-BF16).
TEST(Cli, InfoNamesTheBf16Kernels) {
  const auto r = run_cli("--threads 1 info --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const bool here = cpu_vector_features_here().avx512_bf16;
  EXPECT_EQ(nlohmann::json::parse(r.output)["build"]["bf16_gemm"], here ? "avx512-bf16" : "portable");
  const auto text = run_cli("--threads 1 info");
  EXPECT_NE(text.output.find(here ? "bf16     : AVX512-BF16" : "bf16     : no AVX512-BF16"), std::string::npos)
      << text.output;
}

// Global flags work after the subcommand too; a subcommand's own flag of the
// same name is still its own.
TEST(Cli, GlobalFlagsMayFollowTheSubcommand) {
  const auto r = run_cli("info --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["build"]["threads"], 1);
  const auto typo = run_cli("info --thread 1");
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_NE(typo.output.find("did you mean --threads?"), std::string::npos) << typo.output;
}

// Errors in the command line itself exit 2 whatever their kind, found by the
// parser or by the command (a flag's value or a combination of flags); errors
// found while the command runs exit 1; --help and --version 0.
TEST(Cli, UsageErrorsExitTwo) {
  for (const char* args : {"generate --ckpt x --temperature -1", "generate --bogus", "info --threads x",
                           "ablate --suite demo --out", "generate --ckpt x --prompt y --system z",
                           "generate --ckpt x", "train --init x --init-scheme torch --out y",
                           "info --preset hybrid-official --weights q5", "ablate --out y",
                           "chat --ckpt x --context 8 --max-new-tokens 9"}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(test::count_lines(r.output), 1) << args << "\n" << r.output;
  }
  EXPECT_EQ(run_cli("generate --ckpt /no/such/dir --prompt x").exit_code, 1);
  EXPECT_EQ(run_cli("--help").exit_code, 0);
  EXPECT_EQ(run_cli("--version").exit_code, 0);
}

TEST(Cli, BadFlagGivesOneLineErrorNamingIt) {
  auto r = run_cli("--threads -3 info");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--threads"), std::string::npos) << r.output;
}

TEST(Cli, UnknownSubcommandFails) {
  auto r = run_cli("frobnicate");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("frobnicate"), std::string::npos) << r.output;
}

TEST(Cli, UnknownSubcommandSuggestsTheClosestOne) {
  auto r = run_cli("gen --prompt x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("unknown subcommand 'gen'; did you mean 'generate'?"), std::string::npos) << r.output;
  r = run_cli("trian --steps 1");
  EXPECT_NE(r.output.find("did you mean 'train'?"), std::string::npos) << r.output;
  r = run_cli("zzzzzz");  // nothing close: no guess
  EXPECT_NE(r.output.find("unknown subcommand 'zzzzzz'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
}

TEST(Cli, UnknownFlagSuggestsTheClosestOne) {
  auto r = run_cli("generate --ckpt nowhere --prompt x --top_pp 0.5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("unknown flag '--top_pp' for 'generate'; did you mean --top-p?"), std::string::npos)
      << r.output;
  r = run_cli("eval --ckpt x --max-window 3");
  EXPECT_NE(r.output.find("did you mean --max-windows?"), std::string::npos) << r.output;
  r = run_cli("info --qwertyuiop");
  EXPECT_NE(r.output.find("unknown flag '--qwertyuiop'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
}

// Under `ulimit -v`, OpenBLAS's per-thread buffers used to hang for ever with many threads.
TEST(Cli, ThreadsBeyondTheAddressSpaceLimitFailWithOneLine) {
  // ASan reserves terabytes of shadow address space: no sanitizer build starts under ulimit -v.
  if (test::kSlowBuildFactor > 1.0) GTEST_SKIP() << "needs a build without AddressSanitizer (CI step 1 runs it)";
  const auto r = run_cli("--threads 64 info", "ulimit -v 1500000;");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(test::count_lines(r.output), 1) << r.output;
  for (const char* part : {"--threads 64", "ulimit -v", "--threads "})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " not in " << r.output;
  EXPECT_EQ(run_cli("--threads 2 info", "ulimit -v 1500000;").exit_code, 0);
}

TEST(Cli, HelpAndVersion) {
  auto help = run_cli("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("info"), std::string::npos);
  auto version = run_cli("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("hymba"), std::string::npos);
}

}  // namespace
}  // namespace hymba
