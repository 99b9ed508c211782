#include "dist/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>
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
  std::vector<int> world_rank;  // of each rank of this communicator (names a lost peer)
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

// Every rank's process, exchanged at init: a rank waiting in a sum can tell
// that a peer on its own machine is gone, and name any peer's host.
struct Peer {
  int pid = 0;
  std::string host;
  bool local = false;  // shares this rank's memory node (MPI_COMM_TYPE_SHARED), so its pid is ours to look at
};
std::vector<Peer> g_peers;

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Whether the process `pid` on this machine has ended (gone, or a zombie
// not yet reaped by mpirun).
bool process_ended(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!stat || !std::getline(stat, text)) return true;
  const size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  const char state = text[close + 2];
  return state == 'Z' || state == 'X';
}

double rank_timeout_seconds() {
  const char* v = std::getenv("HYMBA_RANK_TIMEOUT");
  if (v == nullptr || *v == '\0') return 600.0;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  HYMBA_CHECK(end != v && *end == '\0' && t >= 0, "HYMBA_RANK_TIMEOUT: '", v,
              "' is not a number of seconds >= 0 (0: wait for a silent rank forever)");
  return t;
}

std::string describe(int world_rank) {
  const Peer& p = g_peers.at(static_cast<size_t>(world_rank));
  return "rank " + std::to_string(world_rank) + " (host " + p.host + ")";
}

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

// Waits for every request. Meanwhile it watches the peers still owing a
// message: one on this machine whose process ended, or silence for the rank
// timeout, throws PeerLost naming it (MPI itself would wait forever, until
// mpirun kills this rank too).
void wait_watching(const CommState& s, std::vector<MPI_Request>& requests, const std::vector<int>& peer_of,
                   const char* what) {
  static const double timeout = rank_timeout_seconds();
  using clock = std::chrono::steady_clock;
  auto last_progress = clock::now(), last_look = last_progress;
  std::vector<int> finished(requests.size());
  for (;;) {
    int count = 0;
    check_mpi(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, finished.data(),
                           MPI_STATUSES_IGNORE),
              what);
    if (count == MPI_UNDEFINED) return;  // every request is done
    const auto now = clock::now();
    if (count > 0) {
      last_progress = now;
      continue;
    }
    if (now - last_look >= std::chrono::milliseconds(20)) {
      last_look = now;
      const double silent = std::chrono::duration<double>(now - last_progress).count();
      for (size_t i = 0; i < requests.size(); ++i) {
        if (requests[i] == MPI_REQUEST_NULL) continue;
        const int peer = s.world_rank.at(static_cast<size_t>(peer_of[i]));
        const Peer& p = g_peers.at(static_cast<size_t>(peer));
        if (p.local && process_ended(p.pid))
          throw PeerLost(describe(peer) + " stopped: its process (pid " + std::to_string(p.pid) + ") is gone");
        if (timeout > 0 && silent > timeout)
          throw PeerLost(describe(peer) + " stopped answering: nothing from it for " +
                         std::to_string(static_cast<long long>(timeout)) + " s (HYMBA_RANK_TIMEOUT)");
      }
    }
    std::this_thread::yield();  // the ranks of one machine share its cores
  }
}

// Reduce-scatter then allgather, with MPI moving bytes only: rank k receives
// every rank's slice k, adds the slices in a fixed tree, and sends the sum
// back to every rank. No MPI reduction operator runs, so no library decides
// the order of additions; point-to-point messages let the wait name a rank
// that stopped.
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
  s.scratch.resize(static_cast<size_t>(mine) * static_cast<size_t>(size) * sizeof(T));
  T* parts = reinterpret_cast<T*>(s.scratch.data());
  T* own = data + offsets[static_cast<size_t>(rank)];
  std::copy(own, own + mine, parts + static_cast<int64_t>(rank) * mine);
  std::vector<MPI_Request> requests;
  std::vector<int> peer_of;
  auto post = [&](int code, int peer) {
    check_mpi(code, "Isend/Irecv (gradient sum)");
    peer_of.push_back(peer);
  };
  constexpr int kScatterTag = 71, kGatherTag = 72;
  requests.reserve(static_cast<size_t>(2 * size));
  for (int k = 0; k < size; ++k) {
    if (k == rank) continue;
    requests.emplace_back();
    post(MPI_Irecv(parts + static_cast<int64_t>(k) * mine, mine, mpi_type<T>(), k, kScatterTag, s.comm,
                   &requests.back()),
         k);
    requests.emplace_back();
    post(MPI_Isend(data + offsets[static_cast<size_t>(k)], counts[static_cast<size_t>(k)], mpi_type<T>(), k,
                   kScatterTag, s.comm, &requests.back()),
         k);
  }
  wait_watching(s, requests, peer_of, "Isend/Irecv (gradient sum)");
  // A pairwise tree over rank index, ((r0 + r1) + (r2 + r3)) + ...: with N a
  // power of two it is the halving tree --grad-shards continues across ranks.
  for (int width = 1; width < size; width *= 2)
    for (int k = 0; k + width < size; k += 2 * width) {
      T* left = parts + static_cast<int64_t>(k) * mine;
      const T* right = parts + static_cast<int64_t>(k + width) * mine;
      for (int i = 0; i < mine; ++i) left[i] += right[i];
    }
  std::copy(parts, parts + mine, own);
  requests.clear();
  peer_of.clear();
  for (int k = 0; k < size; ++k) {
    if (k == rank) continue;
    requests.emplace_back();
    post(MPI_Irecv(data + offsets[static_cast<size_t>(k)], counts[static_cast<size_t>(k)], mpi_type<T>(), k,
                   kGatherTag, s.comm, &requests.back()),
         k);
    requests.emplace_back();
    post(MPI_Isend(own, mine, mpi_type<T>(), k, kGatherTag, s.comm, &requests.back()), k);
  }
  wait_watching(s, requests, peer_of, "Isend/Irecv (gradient sum)");
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
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Which world ranks share this machine (not by host name: containers may repeat one).
  std::vector<int> node_ranks(static_cast<size_t>(g_local_ranks)), world_ranks(node_ranks.size());
  for (int k = 0; k < g_local_ranks; ++k) node_ranks[static_cast<size_t>(k)] = k;
  MPI_Group node_group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  MPI_Comm_group(node, &node_group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_translate_ranks(node_group, g_local_ranks, node_ranks.data(), world_group, world_ranks.data());
  MPI_Group_free(&node_group);
  MPI_Group_free(&world_group);
  MPI_Comm_free(&node);
  // Each rank's pid and host, as fixed-size records.
  constexpr int kRecord = 264;
  std::string mine(kRecord, '\0');
  const std::string host = host_name(), pid = std::to_string(::getpid());
  std::copy(pid.begin(), pid.end(), mine.begin());
  std::copy_n(host.begin(), std::min<size_t>(host.size(), kRecord - 17), mine.begin() + 16);
  std::string all(static_cast<size_t>(kRecord) * static_cast<size_t>(size), '\0');
  check_mpi(MPI_Allgather(mine.data(), kRecord, MPI_CHAR, all.data(), kRecord, MPI_CHAR, MPI_COMM_WORLD), "Allgather");
  for (int k = 0; k < size; ++k) {
    const char* record = all.data() + static_cast<size_t>(k) * kRecord;
    g_peers.push_back({std::atoi(record), std::string(record + 16), false});
  }
  for (const int k : world_ranks) g_peers.at(static_cast<size_t>(k)).local = true;
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
  for (int k = 0; k < size; ++k) state->world_rank.push_back(k);
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
  // Each member's world rank, so that a lost peer is named as mpirun knows it.
  std::vector<int> members(static_cast<size_t>(size));
  for (int k = 0; k < size; ++k) members[static_cast<size_t>(k)] = k;
  state->world_rank.resize(static_cast<size_t>(size));
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  MPI_Comm_group(state->comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_translate_ranks(group, size, members.data(), world_group, state->world_rank.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
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
