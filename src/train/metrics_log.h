// metrics.jsonl: one JSON record a line, flushed as written, so a killed run
// keeps every record up to its last line.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace hymba {

class MetricsLog {
 public:
  // fresh: start an empty file; otherwise append (a resumed run).
  explicit MetricsLog(const std::string& path, bool fresh = false) {
    if (fresh) write_text_atomic(path, "");
    out_.open(path, std::ios::app);
    HYMBA_CHECK(out_.good(), path, ": cannot open for writing");
  }
  void write(const nlohmann::json& record) {
    out_ << record.dump() << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

}  // namespace hymba
