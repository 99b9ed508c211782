// Pieces the dataset tests share: the published-layout fixtures
// (tests/fixtures/datasets), a scratch copy of one that a test may break,
// and the check that a call fails with one line naming what it should.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace hymba::test {

inline std::string dataset_fixture(const std::string& name) {
  return std::string(HYMBA_FIXTURES_DIR) + "/datasets/" + name;
}

// The message f throws as hymba::Error, "" when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// f fails with one line holding every one of parts.
inline void expect_one_line_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = error_of(f);
  ASSERT_FALSE(msg.empty()) << "no error";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' in: " << msg;
}

// A scratch directory per test, and copies of fixtures into it.
class DatasetScratch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hymba_datasets_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string copy(const std::string& name) {
    std::filesystem::copy(dataset_fixture(name), dir_ / name, std::filesystem::copy_options::recursive);
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

}  // namespace hymba::test
