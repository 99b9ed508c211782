// report.md and report.html of a `classify train` / `classify eval` run,
// rendered from its summary.json: headline figures, per-class precision /
// recall / F1, the confusion matrix, memory and speed, validation history.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hymba::classify {

// Writes dir/report.md and dir/report.html atomically.
void write_classify_report(const std::string& dir, const nlohmann::json& summary);

}  // namespace hymba::classify
