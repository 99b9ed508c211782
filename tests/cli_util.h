// Runs the hymba binary as a user would and captures what it prints.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymba::test {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line and captures its stdout.
inline CliResult run_shell(const std::string& cmd) {
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `prefix` goes before the binary (for example "env -u VAR").
inline CliResult run_cli(const std::string& args, const std::string& prefix = "") {
  return run_shell((prefix.empty() ? "" : prefix + " ") + std::string(HYMBA_CLI_PATH) + " " + args + " 2>&1");
}

// The same with stdout alone in `output` (stderr in `errors`): for output a
// test parses, since progress lines on stderr come and go with the machine's
// speed (eval prints one after 2 s).
struct CliOutput {
  int exit_code = -1;
  std::string output;  // stdout
  std::string errors;  // stderr
};

inline CliOutput run_cli_stdout(const std::string& args) {
  char err_path[] = "/tmp/hymba_cli_stderr_XXXXXX";
  const int fd = mkstemp(err_path);
  CliOutput r;
  if (fd < 0) return r;
  close(fd);
  const CliResult out = run_shell(std::string(HYMBA_CLI_PATH) + " " + args + " 2>" + err_path);
  r.exit_code = out.exit_code;
  r.output = out.output;
  std::ifstream err(err_path);
  r.errors.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  std::remove(err_path);
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// A refusal: exit code 1 and one line holding every part, no library's
// exception text leaking through.
inline void expect_one_line(const CliResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_EQ(r.output.find("json.exception"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  for (const auto& p : parts) EXPECT_NE(r.output.find(p), std::string::npos) << "'" << p << "' not in: " << r.output;
}

// One JSON value per non-empty line (metrics.jsonl).
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace hymba::test
