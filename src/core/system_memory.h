// How much memory this process may still use, so that big allocations can be
// refused up front with a figure and the flag to lower, instead of ending in
// std::bad_alloc (or the OOM killer) halfway through a run.
#pragma once

#include <cstdint>
#include <string>

namespace hymba {

// Bytes this process can still allocate: the smallest of MemAvailable
// (/proc/meminfo), the cgroup v2 limit minus its usage, the address-space
// rlimit, and $HYMBA_MAX_MEMORY (bytes, or with a K/M/G/T suffix) when set.
// -1 when nothing is known.
int64_t available_memory_bytes();

// "1.50 GiB", "512.00 MiB", "12.0 KiB": a byte count for messages.
std::string format_bytes(double bytes);

}  // namespace hymba
