#include "core/system_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace hymba {

namespace {

// A number of bytes with an optional K/M/G/T (binary) suffix; -1 if malformed.
int64_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0)) return -1;
  double scale = 1;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case '\0': break;
    case 'K': scale = 1024.0; break;
    case 'M': scale = 1024.0 * 1024; break;
    case 'G': scale = 1024.0 * 1024 * 1024; break;
    case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
    default: return -1;
  }
  const double bytes = v * scale;
  return bytes >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(bytes);
}

int64_t read_number_file(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  return parse_bytes(word);
}

int64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// A "Vm...:" field of /proc/self/status in bytes; -1 when absent.
int64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == field) {
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return -1;
}

// Bytes of address space this process already holds (VmSize).
int64_t address_space_used() { return std::max<int64_t>(0, status_bytes("VmSize:")); }

void keep_smaller(int64_t& best, int64_t candidate) {
  if (candidate >= 0 && (best < 0 || candidate < best)) best = candidate;
}

}  // namespace

int64_t available_memory_bytes() {
  int64_t best = -1;
  if (const char* cap = std::getenv("HYMBA_MAX_MEMORY"); cap != nullptr && *cap != '\0') {
    const int64_t v = parse_bytes(cap);
    HYMBA_CHECK(v >= 0, "HYMBA_MAX_MEMORY='", cap, "' is not a byte count (e.g. 4G, 512M)");
    keep_smaller(best, v);
  }
  keep_smaller(best, meminfo_available());
  // A container's cgroup limit is invisible in /proc/meminfo.
  const int64_t limit = read_number_file("/sys/fs/cgroup/memory.max");
  const int64_t used = read_number_file("/sys/fs/cgroup/memory.current");
  if (limit >= 0) keep_smaller(best, std::max<int64_t>(0, limit - std::max<int64_t>(used, 0)));
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    keep_smaller(best, std::max<int64_t>(0, static_cast<int64_t>(std::min<rlim_t>(rl.rlim_cur, INT64_MAX)) -
                                                address_space_used()));
  return best;
}

int64_t address_space_left_bytes() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
  return std::max<int64_t>(0, static_cast<int64_t>(std::min<rlim_t>(rl.rlim_cur, INT64_MAX)) - address_space_used());
}

int64_t resident_bytes() { return std::max<int64_t>(0, status_bytes("VmRSS:")); }

int64_t peak_rss_bytes() {
  if (const int64_t hwm = status_bytes("VmHWM:"); hwm >= 0) return hwm;
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

void release_mapped_pages(const void* p, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page - 1) / page * page, end = (begin + static_cast<uintptr_t>(bytes)) / page * page;
  // Best effort: where the kernel refuses, the pages merely stay resident.
  if (end > first) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

namespace {

// Calls run(first, end) for each run of whole pages inside [p, p + bytes)
// whose pagemap entries say resident (bit 63) and file page (bit 61).
template <typename Run>
void for_resident_file_pages(const void* p, int64_t bytes, Run run) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page - 1) / page * page, end = (begin + static_cast<uintptr_t>(bytes)) / page * page;
  if (end <= first) return;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  constexpr size_t kBatch = 4096;
  std::vector<uint64_t> entries(kBatch);
  uintptr_t run_start = 0;
  bool in_run = false;
  for (uintptr_t at = first; at < end;) {
    const size_t n = std::min<size_t>(kBatch, (end - at) / page);
    const auto off = static_cast<off_t>(at / page * sizeof(uint64_t));
    if (::pread(fd, entries.data(), n * sizeof(uint64_t), off) != static_cast<ssize_t>(n * sizeof(uint64_t))) break;
    for (size_t i = 0; i < n; ++i, at += page) {
      const bool file_page = (entries[i] >> 63 & 1) != 0 && (entries[i] >> 61 & 1) != 0;
      if (file_page && !in_run) run_start = at;
      if (!file_page && in_run) run(run_start, at);
      in_run = file_page;
    }
  }
  if (in_run) run(run_start, end);
  ::close(fd);
}

}  // namespace

int64_t resident_file_bytes(const void* p, int64_t bytes) {
  int64_t total = 0;
  for_resident_file_pages(p, bytes, [&total](uintptr_t a, uintptr_t b) { total += static_cast<int64_t>(b - a); });
  return total;
}

void release_unwritten_file_pages(const void* p, int64_t bytes) {
  for_resident_file_pages(p, bytes, [](uintptr_t a, uintptr_t b) {
    ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  });
}

bool reset_peak_rss() {
#ifdef __GLIBC__
  // Freed heap glibc still holds would count toward the next run's peak.
  ::malloc_trim(0);
#endif
  // "5" resets the peak RSS (Documentation/filesystems/proc.rst, clear_refs).
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  else
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

}  // namespace hymba
