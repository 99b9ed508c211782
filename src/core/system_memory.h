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

// What the address-space rlimit (ulimit -v) leaves this process, in bytes;
// -1 when there is no limit.
int64_t address_space_left_bytes();

// The process's resident set now (VmRSS) in bytes; 0 when unknown.
int64_t resident_bytes();
// The process's resident-set high-water mark (VmHWM, else getrusage's
// ru_maxrss) in bytes; 0 when unknown.
int64_t peak_rss_bytes();
// Returns freed heap to the system (glibc) and resets that high-water mark to
// the current RSS (Linux /proc/self/clear_refs), so that the next
// peak_rss_bytes() measures from now on. False where the kernel refuses: the
// peak then covers the whole process.
bool reset_peak_rss();

// Drops the whole pages inside [p, p + bytes) of a read-only file mapping
// from this process's resident set (madvise MADV_DONTNEED); reading them
// again faults them back in from the file. Never for anonymous memory, whose
// pages this would zero.
void release_mapped_pages(const void* p, int64_t bytes);

// The bytes of the whole pages inside [p, p + bytes) that are resident and
// file pages (/proc/self/pagemap), and the same pages dropped from the
// resident set: of a copy-on-write file mapping, exactly the pages never
// written, which read back from the file as they were. Written (copied)
// pages and anonymous memory are left alone, so this never loses a value.
// Both are 0 / do nothing where pagemap cannot be read.
int64_t resident_file_bytes(const void* p, int64_t bytes);
void release_unwritten_file_pages(const void* p, int64_t bytes);

// "1.50 GiB", "512.00 MiB", "12.0 KiB": a byte count for messages.
std::string format_bytes(double bytes);

}  // namespace hymba
