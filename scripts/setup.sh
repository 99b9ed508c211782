#!/usr/bin/env bash
# Installs the Debian packages hymba.cpp needs to build, test and benchmark.
# Idempotent: it asks apt only for what is missing and says what it does.
# Runs as root, or through sudo when not root.
#   scripts/setup.sh          the build, tests and benchmarks
#   scripts/setup.sh --fuzz   also Debian's clang and its libFuzzer runtime
#                             (the fuzz preset, docs/security.md)
#   scripts/setup.sh --python also the Python package's build and test
#                             dependencies (docs/python.md); scripts/dev test
#                             passes it.
#   scripts/setup.sh --peers  also Debian's PyTorch, for the peers the
#                             benchmarks time beside the engine
#                             (bench/infer_speed.py, train_speed.py,
#                             synth_peer.py). Options combine.
set -euo pipefail

PACKAGES=(
  # toolchain and build
  g++ cmake ninja-build make pkg-config ccache
  # CPU maths: OpenBLAS built against OpenMP, so BLAS calls share our thread pool
  libopenblas-openmp-dev libomp-dev
  # libraries
  nlohmann-json3-dev libcli11-dev libsentencepiece-dev
  # Unicode normalization (NFC, NFKC, ...) for tokenizer.json normalizers
  libunistring-dev
  # Unicode regexes (JIT): tokenizer.json pre-tokenizers and the byte-level BPE trainer
  libpcre2-dev
  # HTTP server of `hymba serve`
  libcpp-httplib-dev
  # MPI: data-parallel training and distributed suites under mpirun (docs/training.md)
  libopenmpi-dev openmpi-bin
  # tests and micro-benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # built-in default corpus (data files only) and report plots
  fortunes-min gnuplot-nox
)
for arg in "$@"; do
  case "$arg" in
    --fuzz)
      # clang with -fsanitize=fuzzer (libclang_rt.fuzzer, in libclang-rt-14-dev).
      PACKAGES+=(clang libclang-rt-14-dev)
      ;;
    --python)
      # The `hymba` Python package: pybind11 bindings (built when these are
      # present), numpy arrays, and its tests (pytest, pandas tables, tqdm
      # progress bars; examples/seed001.ipynb run headless by nbclient).
      PACKAGES+=(python3-dev pybind11-dev python3-numpy python3-pytest python3-pandas python3-tqdm
                 python3-nbclient python3-ipykernel python3-nbformat python3-matplotlib)
      ;;
    --peers)
      PACKAGES+=(python3-torch python3-numpy)
      ;;
    *)
      echo "setup: unknown option $arg (--fuzz, --python, --peers)" >&2
      exit 2
      ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} required packages are installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup: missing packages (${missing[*]}) and not root and no sudo; install them and rerun" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
