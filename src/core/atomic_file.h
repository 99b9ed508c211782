// Whole-file reads and crash-safe writes. A write goes to a temporary file in
// the same directory, is flushed and fsynced, then renamed over the target and
// the directory fsynced: readers see either the old file or the complete new
// one, never a torn mix, even if the process or machine dies midway.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace hymba {

// Writes `path` atomically. `writer` fills the temporary file
// (`path + ".tmp.<pid>"`) through the given stream; stream errors are caught
// afterwards, so it may use plain fwrite/fprintf. If the writer throws or any
// step fails, the temporary file is removed and the previous `path` is left
// untouched; failures throw hymba::Error naming the path and the OS reason.
void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& writer);

// Removes the "*.tmp.<pid>" files that write_file_atomic left in `dir` and
// its direct subdirectories when process <pid> died mid-write (that process
// no longer exists). Returns how many were removed.
int remove_stale_temp_files(const std::string& dir);

// Atomic write of a byte string (JSON, text, small binary files).
void write_text_atomic(const std::string& path, const std::string& text);

// The whole file as bytes; hymba::Error naming the path when it is missing,
// a directory or unreadable.
std::string read_file(const std::string& path);

// read_file parsed by parse_json (core/json_io.h): duplicate keys refused,
// errors one line naming the file and field.
nlohmann::json read_json_file(const std::string& path);

// fwrite that throws hymba::Error naming `path` on a short write, for writers
// that want to stop at the first failure.
void write_bytes(std::FILE* f, const void* data, std::size_t bytes, const std::string& path);

}  // namespace hymba
