#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/json_io.h"

namespace hymba {

namespace {

std::string os_reason(int err) { return std::strerror(err); }

// Closes the stream and removes the temporary file; used on every failure
// path so no "*.tmp.<pid>" is left behind.
void discard(std::FILE* f, const std::string& tmp) {
  if (f != nullptr) std::fclose(f);
  std::remove(tmp.c_str());
}

// Makes the rename itself durable. Some filesystems cannot fsync a directory
// (EINVAL); the file data is already synced there, so that is not an error.
void sync_parent_dir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open directory '", dir, "' to sync it: ", os_reason(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP) fail(path, ": cannot sync directory '", dir, "': ", os_reason(err));
}

}  // namespace

void write_bytes(std::FILE* f, const void* data, std::size_t bytes, const std::string& path) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, f) != bytes) fail(path, ": write failed: ", os_reason(errno));
}

void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& writer) {
  HYMBA_CHECK(!path.empty(), "cannot write a file with an empty path");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());

  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail(path, ": cannot create temporary file '", tmp, "': ", os_reason(errno));

  try {
    writer(f);
  } catch (...) {
    discard(f, tmp);
    throw;
  }

  // ferror catches writes the writer did not check (stdio has lost their
  // errno by now); fflush pushes the stdio buffer to the kernel and fsync the
  // kernel's copy to the disk.
  if (std::ferror(f)) {
    discard(f, tmp);
    fail(path, ": write failed (error on the output stream)");
  }
  if (std::fflush(f) != 0) {
    int err = errno;
    discard(f, tmp);
    fail(path, ": write failed: ", os_reason(err));
  }
  if (::fsync(::fileno(f)) != 0) {
    int err = errno;
    discard(f, tmp);
    fail(path, ": cannot sync to disk: ", os_reason(err));
  }
  if (std::fclose(f) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(path, ": cannot close temporary file '", tmp, "': ", os_reason(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(path, ": cannot replace with temporary file '", tmp, "': ", os_reason(err));
  }
  sync_parent_dir(path);
}

int remove_stale_temp_files(const std::string& dir) {
  namespace fs = std::filesystem;
  int removed = 0;
  auto sweep = [&](const fs::path& folder) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      const std::string name = entry.path().filename().string();
      const size_t at = name.rfind(".tmp.");
      if (at == std::string::npos || at + 5 == name.size()) continue;
      const std::string digits = name.substr(at + 5);
      if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
      const auto pid = static_cast<pid_t>(std::stol(digits));
      // Only files of writers that are gone: a live pid may be writing now.
      if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
      if (entry.is_regular_file(ec) && fs::remove(entry.path(), ec)) ++removed;
    }
  };
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  sweep(dir);
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) sweep(entry.path());
  return removed;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&](std::FILE* f) { write_bytes(f, text.data(), text.size(), path); });
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", os_reason(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", os_reason(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail(path, ": is a directory, expected a file");
  }

  // The size is only a hint (pipes and /proc report 0): read until EOF,
  // straight into the string, growing it when the hint was short.
  std::string out(st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0, '\0');
  std::size_t used = 0;
  for (;;) {
    if (used == out.size()) out.resize(out.size() + (1 << 16));
    ssize_t got = ::read(fd, out.data() + used, out.size() - used);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail(path, ": read failed: ", os_reason(err));
    }
    used += static_cast<std::size_t>(got);
  }
  out.resize(used);
  ::close(fd);
  return out;
}

nlohmann::json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

}  // namespace hymba
