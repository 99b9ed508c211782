// The `hymba` command-line tool: subcommands for building, training,
// evaluating and serving hybrid-head language models.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <exception>
#include <filesystem>
#include <new>
#include <stdexcept>

#include "cli/commands.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/system_memory.h"
#include "core/threading.h"
#include "dist/communicator.h"
#include "train/stop_signal.h"

namespace hymba::cli {

namespace {

// Address space one worker thread reserves: OpenBLAS's per-thread buffer (32 MiB),
// its stack (8 MiB) and glibc's per-thread malloc arena (64 MiB reserved).
constexpr int64_t kAddressSpacePerThread = int64_t{112} << 20;

// Under `ulimit -v`, OpenBLAS spins for ever when its per-thread buffers do not
// fit, so check first: refuse an explicit --threads, shrink the default.
int threads_within_address_space(int requested) {
  const int64_t left = address_space_left_bytes();
  const int wanted = requested > 0 ? requested : num_threads();
  if (left < 0 || wanted <= 1) return requested;
  const int64_t fit = std::max<int64_t>(1, left / 2 / kAddressSpacePerThread);  // half stays for the model
  if (wanted <= fit) return requested;
  HYMBA_CHECK(requested == 0, "--threads ", requested, ": ", requested, " threads reserve about ",
              format_bytes(static_cast<double>(requested) * kAddressSpacePerThread),
              " of address space (BLAS buffers, stacks) but the address-space limit (ulimit -v) leaves ",
              format_bytes(static_cast<double>(left)), "; use --threads ", fit, " or less, or raise the limit");
  return static_cast<int>(fit);
}

}  // namespace

// Under mpirun the ranks on one machine share its cores: without --threads
// or OMP_NUM_THREADS each takes cores / local ranks.
int default_threads(int requested) {
  const int local = dist::local_ranks();
  if (requested > 0 || local <= 1 || std::getenv("OMP_NUM_THREADS") != nullptr) return requested;
  return std::max(1, max_hardware_threads() / local);
}

void apply_global_options(const GlobalOptions& global) {
  set_num_threads(threads_within_address_space(default_threads(global.threads)));
}

int command_threads(const GlobalOptions& global) { return default_threads(global.threads); }

}  // namespace hymba::cli

namespace {

// Settings the OpenMP and OpenBLAS libraries read when they load, before
// main: when the user has not chosen them we set them and start over once.
// - OMP_WAIT_POLICY=passive: OpenMP threads that spin while waiting make
//   every kernel 5-10x slower as soon as the cores are shared (another job, a
//   build, a second run). A user who owns the machine can export
//   OMP_WAIT_POLICY=active.
// - OPENBLAS_CORETYPE, only where OpenBLAS runs kernels below what a CPU it
//   does not know can run: generic SSE ones on AVX2 / AVX-512 CPUs, AVX2 ones
//   on AVX-512 CPUs (core/build_info.h).
void prepare_library_environment(char** argv) {
  bool changed = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && ::setenv("OMP_WAIT_POLICY", "passive", 1) == 0) changed = true;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    const std::string core = hymba::better_openblas_core_here();
    if (!core.empty() && ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0) {
      ::setenv(hymba::kReplacedCoreVariable, hymba::openblas_core_here().c_str(), 1);
      changed = true;
    }
  }
  if (changed) ::execv("/proc/self/exe", argv);  // returns only on failure: carry on as we are
}

// "hymba", or "hymba (rank 1 of 4)" under mpirun: an error names the rank it came from.
std::string who() {
  const hymba::dist::Communicator& w = hymba::dist::world();
  if (w.size() == 1) return "hymba";
  return "hymba (rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) + ")";
}

int run_command(int argc, char** argv, bool* interrupted);

// Every error in the command line itself (an unknown or missing flag, a value
// out of range or of the wrong type) exits 2, where CLI11 has a code per kind
// (105, 106, ...); errors found while the command runs exit 1.
int usage_status(int cli11_status) { return cli11_status == 0 ? 0 : 2; }

}  // namespace

int main(int argc, char** argv) {
  prepare_library_environment(argv);
  try {
    hymba::dist::init(&argc, &argv);
  } catch (const hymba::Error& e) {
    std::fprintf(stderr, "hymba: error: %s\n", e.what());
    return 1;
  }
  bool interrupted = false;
  const int status = run_command(argc, argv, &interrupted);
  // A failing rank ends the job: the others may wait in a collective for it.
  // An interruption is agreed by every rank (the trainer), so they end together.
  if (status != 0 && !interrupted && hymba::dist::world().size() > 1) hymba::dist::abort_job(status);
  hymba::dist::finalize();
  return status;
}

namespace {

int run_command(int argc, char** argv, bool* interrupted) {
  CLI::App app{"hymba: build, train, ablate, evaluate and serve hybrid attention + Mamba language models"};
  app.set_version_flag("--version", std::string("hymba ") + HYMBA_VERSION);
  hymba::cli::GlobalOptions global;
  app.add_option("-t,--threads", global.threads, "CPU threads for kernels (0 = OMP_NUM_THREADS or all cores)")
      ->check(hymba::cli::range(0, 4096));
  // One-line errors that name the flag, like every other error we print.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("hymba: error: ") + e.what() + " (see --help)\n";
  });
  app.footer("Run 'hymba SUBCOMMAND --help' for the flags of one subcommand.");
  // Global flags may also follow the subcommand (`hymba generate --threads 1`);
  // a subcommand's own flag of the same name (serve --threads) wins.
  app.fallthrough();

  hymba::cli::register_info(app, global);
  hymba::cli::register_presets(app, global);
  hymba::cli::register_model_commands(app, global);
  hymba::cli::register_train(app, global);
  hymba::cli::register_eval(app, global);
  hymba::cli::register_tokenizer(app, global);
  hymba::cli::register_generate(app, global);
  hymba::cli::register_chat(app, global);
  hymba::cli::register_bench_infer(app, global);
  hymba::cli::register_serve(app, global);
  hymba::cli::register_ablate(app, global);
  hymba::cli::register_synth(app, global);
  hymba::cli::register_classify(app, global);
  hymba::cli::register_import_export(app, global);
  hymba::cli::require_integer_text(app);

  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr, "%s", app.help().c_str());
      std::fprintf(stderr, "hymba: error: no subcommand given\n");
      return 2;
    }
  } catch (const CLI::ExtrasError& e) {
    const std::string why = hymba::cli::explain_unexpected_arguments(app);
    if (why.empty()) return usage_status(app.exit(e));
    std::fprintf(stderr, "hymba: error: %s (see --help)\n", hymba::excerpt(why, 300).c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    return usage_status(app.exit(e));  // --help and --version: 0
  } catch (const hymba::Interrupted& e) {
    // Every rank stops at the same step; rank 0 saved the checkpoint and says so.
    if (hymba::dist::world().is_root()) std::fprintf(stderr, "%s: %s\n", who().c_str(), e.what());
    *interrupted = true;
    return e.exit_status();  // 128 + signal, as a shell reports a killed command
  } catch (const hymba::cli::UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", who().c_str(), hymba::excerpt(e.what(), 1000).c_str());
    return 2;
  } catch (const hymba::Error& e) {
    // Messages quote at most ~80 bytes of a value (hymba::excerpt); the cap is
    // a last resort for one that did not, so a line is never megabytes long.
    std::fprintf(stderr, "%s: error: %s\n", who().c_str(), hymba::excerpt(e.what(), 1000).c_str());
    return 1;
  } catch (const std::length_error& e) {
    std::fprintf(stderr, "hymba: error: a size is too large (%s); lower the sizes (--batch, --seq-len, "
                         "--max-new-tokens, or the model config's)\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // The commands estimate their memory before allocating; this is the last
    // resort for whatever the estimates miss.
    std::fprintf(stderr, "hymba: error: out of memory; lower the sizes (--batch, --seq-len, --max-new-tokens, "
                         "or the model config's)\n");
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // "filesystem error: cannot ...: File name too long [PATH]": name the path
    // (cut, it may be a hostile file's) and the reason, as our errors do.
    std::string what = e.path1().empty() ? std::string("a file") : hymba::excerpt(e.path1().string(), 300);
    std::fprintf(stderr, "hymba: error: %s: %s\n", what.c_str(), e.code().message().c_str());
    return 1;
  } catch (const nlohmann::json::exception& e) {
    // Every JSON reader checks types and names the file; this is the last
    // resort for a value one of them missed.
    std::fprintf(stderr, "hymba: error: unexpected JSON value (%s)\n",
                 hymba::excerpt(hymba::json_error_message(e), 200).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hymba: internal error: %s\n", hymba::excerpt(e.what(), 300).c_str());
    return 2;
  }
  return 0;
}

}  // namespace
