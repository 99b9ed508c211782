/* How two-thread work runs right after a few seconds of one busy thread.
 *
 *   cc -O2 -fopenmp bench/vcpu_after_idle.c -o /tmp/vcpu_after_idle
 *   OMP_WAIT_POLICY=passive /tmp/vcpu_after_idle WORK_US SECONDS BUSY_SECONDS
 *
 * Spins one thread for BUSY_SECONDS (as a model's single-threaded load or
 * repack does), then for SECONDS runs OpenMP regions of two threads, each
 * thread busy for WORK_US microseconds of wall time, and prints the mean
 * region time against WORK_US and the share of regions whose two threads
 * ran on the same CPU (sched_getcpu). On a quiet machine the region takes
 * WORK_US plus the wake-up; docs/benchmarks.md has what a 2-vCPU VM gives. */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink = 0;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void spin_for(double seconds) {
  const double start = now();
  double x = 0;
  while (now() - start < seconds) x += 1.0;
  sink += x;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s WORK_US SECONDS BUSY_SECONDS\n", argv[0]);
    return 2;
  }
  const double work_us = atof(argv[1]), seconds = atof(argv[2]), busy = atof(argv[3]);
  if (work_us <= 0 || seconds <= 0 || busy < 0) {
    fprintf(stderr, "%s: WORK_US and SECONDS must be positive, BUSY_SECONDS not negative\n", argv[0]);
    return 2;
  }
  spin_for(busy);
  long regions = 0, same_cpu = 0;
  double region_time = 0;
  const double start = now();
  while (now() - start < seconds) {
    int cpu[2] = {-1, -1};
    const double r0 = now();
#pragma omp parallel num_threads(2)
    {
      spin_for(work_us * 1e-6);
      cpu[omp_get_thread_num() & 1] = sched_getcpu();
    }
    region_time += now() - r0;
    ++regions;
    if (cpu[0] == cpu[1]) ++same_cpu;
  }
  printf("after %.1f s of one busy thread: %ld regions of %.0f us, mean %.0f us, %.1f %% on one CPU\n", busy,
         regions, work_us, 1e6 * region_time / (double)regions, 100.0 * (double)same_cpu / (double)regions);
  return 0;
}
