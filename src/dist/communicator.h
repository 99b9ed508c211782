// The one place hymba talks MPI (docs/training.md, "Several processes: MPI").
// The trainer and the suites see ranks, sums, broadcasts and barriers through
// Communicator; nothing else includes <mpi.h>. Built without MPI (HYMBA_MPI
// OFF, or no MPI found), every communicator is a single process and the same
// code runs unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace hymba::dist {

// A peer rank stopped while this rank waited for it in a sum: its process is
// gone (a peer on this machine), or it sent nothing for the rank timeout
// (HYMBA_RANK_TIMEOUT seconds, default 600; 0: wait forever). The message
// names the rank and its host.
class PeerLost : public Error {
 public:
  using Error::Error;
};

// Whether this build can run as several MPI ranks.
bool mpi_built();

// Called once by the CLI before it parses anything. Under mpirun (its
// environment names a world size) it initialises MPI; a plain start stays one
// process and never touches MPI. Throws hymba::Error when mpirun started
// several copies of a build without MPI (each would train alone).
void init(int* argc, char*** argv);
// Ends MPI after every rank got here (the normal end of the command).
void finalize();
// Ends every rank of the job now with `status` (an error on one rank: the
// others may be waiting in a collective that would never complete).
[[noreturn]] void abort_job(int status);

// Ranks of this job on this machine (1 when not under MPI): threads per rank
// default to the cores divided by this.
int local_ranks();

struct CommState;  // the MPI communicator and scratch buffers; defined in the .cpp

class Communicator {
 public:
  // One process alone.
  Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // Element-wise sum over the ranks, left on every rank. The sum is taken in
  // a fixed pairwise tree over rank index (((r0 + r1) + (r2 + r3)) + ...)
  // whatever order the messages arrive in, so repeated runs are bit-identical. Bandwidth as a ring allreduce:
  // each rank sends and receives 2 (N-1)/N of the buffer.
  void sum(float* data, int64_t n) const;
  void sum(double* data, int64_t n) const;
  // The root's text on every rank.
  void broadcast(std::string& text, int root = 0) const;
  // Every rank's text, in rank order, on the root (empty elsewhere).
  std::vector<std::string> gather(const std::string& text, int root = 0) const;
  void barrier() const;
  // Ranks with the same colour form one communicator (ranked as here).
  Communicator split(int color) const;

  // Seconds spent in sum() so far (the communication share of a step).
  double sum_seconds() const;

 private:
  Communicator(int rank, int size, std::shared_ptr<CommState> state);
  friend const Communicator& world();
  int rank_ = 0, size_ = 1;
  std::shared_ptr<CommState> state_;
};

// Every rank of the job (one process when not under mpirun).
const Communicator& world();

}  // namespace hymba::dist
