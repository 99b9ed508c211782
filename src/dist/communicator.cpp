#include "dist/communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <optional>
#include <type_traits>

#include "core/error.h"

#ifdef HYMBA_WITH_MPI
#include <mpi.h>
#endif

namespace hymba::dist {

namespace {

// The world size mpirun (Open MPI, or a PMI launcher) announces to each copy.
int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::max(1, std::atoi(v));
  return 1;
}

int g_local_ranks = 1;

}  // namespace

#ifdef HYMBA_WITH_MPI

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;  // made by split(): freed with the last copy
  std::vector<char> scratch;
  double sum_seconds = 0.0;
  ~CommState() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !finalized) MPI_Comm_free(&comm);
  }
};

namespace {

bool g_initialized = false;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// MPI calls return their error (MPI_ERRORS_RETURN) and become one hymba::Error.
void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  fail("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(len)),
       " (another rank probably died; see mpirun's message)");
}

template <typename T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else return MPI_DOUBLE;
}

int as_count(int64_t n) {
  HYMBA_CHECK(n >= 0 && n <= INT_MAX, "MPI: a message of ", n, " elements is larger than MPI's int counts");
  return static_cast<int>(n);
}

// Reduce-scatter then allgather, with MPI moving bytes only: rank k receives
// every rank's slice k, adds the slices in rank order, and the sums are
// gathered back. No MPI reduction operator runs, so no library decides the
// order of additions.
template <typename T>
void ordered_sum(CommState& s, int size, int rank, T* data, int64_t n) {
  const int64_t slice = (n + size - 1) / size;
  std::vector<int> counts(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  for (int k = 0; k < size; ++k) {
    const int64_t begin = std::min<int64_t>(n, k * slice), end = std::min<int64_t>(n, (k + 1) * slice);
    offsets[static_cast<size_t>(k)] = as_count(begin);
    counts[static_cast<size_t>(k)] = as_count(end - begin);
  }
  const int mine = counts[static_cast<size_t>(rank)];
  std::vector<int> recv_counts(static_cast<size_t>(size), mine), recv_offsets(static_cast<size_t>(size));
  for (int k = 0; k < size; ++k) recv_offsets[static_cast<size_t>(k)] = k * mine;
  s.scratch.resize(static_cast<size_t>(mine) * static_cast<size_t>(size) * sizeof(T));
  T* parts = reinterpret_cast<T*>(s.scratch.data());
  check_mpi(MPI_Alltoallv(data, counts.data(), offsets.data(), mpi_type<T>(), parts, recv_counts.data(),
                          recv_offsets.data(), mpi_type<T>(), s.comm),
            "Alltoallv (gradient sum)");
  T* out = data + offsets[static_cast<size_t>(rank)];
  std::copy(parts, parts + mine, out);
  for (int k = 1; k < size; ++k) {
    const T* part = parts + static_cast<int64_t>(k) * mine;
    for (int i = 0; i < mine; ++i) out[i] += part[i];
  }
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, mpi_type<T>(), data, counts.data(), offsets.data(), mpi_type<T>(), s.comm),
            "Allgatherv (gradient sum)");
}

}  // namespace

bool mpi_built() { return true; }

void init(int* argc, char*** argv) {
  if (g_initialized || launcher_world_size() <= 1) return;
  int provided = 0;
  // Only the main thread calls MPI; OpenMP workers never do.
  HYMBA_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS, "MPI_Init failed");
  g_initialized = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "Comm_split_type");
  MPI_Comm_size(node, &g_local_ranks);
  MPI_Comm_free(&node);
}

void finalize() {
  if (!g_initialized) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void abort_job(int status) {
  if (g_initialized) MPI_Abort(MPI_COMM_WORLD, status);
  std::exit(status);
}

const Communicator& world() {
  // Made on first use, after init(); only the main thread calls MPI.
  static std::optional<Communicator> w;
  if (w) return *w;
  if (!g_initialized) return w.emplace();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto state = std::make_shared<CommState>();
  state->comm = MPI_COMM_WORLD;
  w = Communicator(rank, size, state);
  return *w;
}

void Communicator::sum(float* data, int64_t n) const {
  if (size_ == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  ordered_sum(*state_, size_, rank_, data, n);
  state_->sum_seconds += seconds_since(t0);
}

void Communicator::sum(double* data, int64_t n) const {
  if (size_ == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  ordered_sum(*state_, size_, rank_, data, n);
  state_->sum_seconds += seconds_since(t0);
}

void Communicator::broadcast(std::string& text, int root) const {
  if (size_ == 1) return;
  int64_t length = static_cast<int64_t>(text.size());
  check_mpi(MPI_Bcast(&length, 1, MPI_INT64_T, root, state_->comm), "Bcast");
  text.resize(static_cast<size_t>(length));
  check_mpi(MPI_Bcast(text.data(), as_count(length), MPI_CHAR, root, state_->comm), "Bcast");
}

std::vector<std::string> Communicator::gather(const std::string& text, int root) const {
  if (size_ == 1) return {text};
  const int length = as_count(static_cast<int64_t>(text.size()));
  std::vector<int> lengths(static_cast<size_t>(size_));
  check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, state_->comm), "Gather");
  std::vector<int> offsets(static_cast<size_t>(size_));
  int64_t total = 0;
  for (int k = 0; k < size_; ++k) {
    offsets[static_cast<size_t>(k)] = as_count(total);
    total += lengths[static_cast<size_t>(k)];
  }
  std::string all(rank_ == root ? static_cast<size_t>(total) : 0, '\0');
  check_mpi(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, root,
                        state_->comm),
            "Gatherv");
  std::vector<std::string> out;
  if (rank_ != root) return out;
  for (int k = 0; k < size_; ++k)
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(k)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(k)])));
  return out;
}

void Communicator::barrier() const {
  if (size_ == 1) return;
  check_mpi(MPI_Barrier(state_->comm), "Barrier");
}

Communicator Communicator::split(int color) const {
  if (size_ == 1) return Communicator();
  auto state = std::make_shared<CommState>();
  check_mpi(MPI_Comm_split(state_->comm, color, rank_, &state->comm), "Comm_split");
  state->owned = true;
  MPI_Comm_set_errhandler(state->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(state->comm, &rank);
  MPI_Comm_size(state->comm, &size);
  return Communicator(rank, size, state);
}

#else  // built without MPI: one process, always

struct CommState {
  double sum_seconds = 0.0;
};

bool mpi_built() { return false; }

void init(int*, char***) {
  const int ranks = launcher_world_size();
  HYMBA_CHECK(ranks <= 1, "mpirun started ", ranks, " copies of a hymba built without MPI, which would each train "
              "alone; rebuild with MPI (install libopenmpi-dev, configure with -DHYMBA_MPI=ON) or run one process");
}

void finalize() {}

void abort_job(int status) { std::exit(status); }

const Communicator& world() {
  static const Communicator w;
  return w;
}

void Communicator::sum(float*, int64_t) const {}
void Communicator::sum(double*, int64_t) const {}
void Communicator::broadcast(std::string&, int) const {}
std::vector<std::string> Communicator::gather(const std::string& text, int) const { return {text}; }
void Communicator::barrier() const {}
Communicator Communicator::split(int) const { return Communicator(); }

#endif

Communicator::Communicator() : state_(std::make_shared<CommState>()) {}

Communicator::Communicator(int rank, int size, std::shared_ptr<CommState> state)
    : rank_(rank), size_(size), state_(std::move(state)) {}

double Communicator::sum_seconds() const { return state_->sum_seconds; }

int local_ranks() { return g_local_ranks; }

}  // namespace hymba::dist
