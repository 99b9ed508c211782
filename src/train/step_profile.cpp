#include "train/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace hymba {

namespace {

using json = nlohmann::json;

json shape_record(const cpu::ProductShape& s, const cpu::ProductTime& t, double peak_seconds, double steps) {
  const double per_call = t.seconds / static_cast<double>(t.calls);
  return {{"kind", cpu::to_string(s.kind)},
          {"M", s.M},
          {"N", s.N},
          {"K", s.K},
          {"accumulate", s.accumulate},
          {"calls_per_step", static_cast<double>(t.calls) / steps},
          {"seconds_per_step", t.seconds / steps},
          {"gflops", s.flops() / per_call * 1e-9},
          {"peak_gflops", s.flops() / peak_seconds * 1e-9}};
}

std::string format(const char* fmt, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

}  // namespace

json profile_report(const StepProfile& p, cpu::MatmulPrecision precision, int replays) {
  const double n = static_cast<double>(std::max<int64_t>(p.steps, 1));
  const cpu::MatmulPrecisionScope scope(precision);
  const double traced_s = p.products.seconds(), flops = p.products.flops();
  double peak_s = 0.0;  // the traced calls at each shape's replayed best
  json shapes = json::array();
  for (const auto& [shape, t] : p.products.by_shape()) {
    const double best = cpu::replay_product(shape, replays);
    peak_s += best * static_cast<double>(t.calls);
    shapes.push_back(shape_record(shape, t, best, n));
  }
  std::sort(shapes.begin(), shapes.end(), [](const json& a, const json& b) {
    return a["seconds_per_step"].get<double>() > b["seconds_per_step"].get<double>();
  });
  const double step_s = p.step_s / n;
  json r = {{"steps", p.steps},
            {"precision", cpu::to_string(precision)},
            {"step_s", step_s},
            {"gradients_s", p.gradients_s / n},
            {"optimizer_s", p.optimizer_s / n},
            {"products_s", traced_s / n},
            {"products_share", step_s > 0 ? traced_s / n / step_s : 0.0},
            {"products_gflops", traced_s > 0 ? flops / traced_s * 1e-9 : 0.0},
            {"peak_gflops", peak_s > 0 ? flops / peak_s * 1e-9 : 0.0},
            {"peak_share", traced_s > 0 ? peak_s / traced_s : 0.0},
            {"shapes", shapes}};
  if (p.forward_s > 0) {
    r["forward_s"] = p.forward_s / n;
    r["backward_s"] = (p.gradients_s - p.forward_s) / n;
  }
  return r;
}

std::string profile_text(const json& r) {
  std::string out = "profile over " + std::to_string(r["steps"].get<int64_t>()) + " steps (" +
                    r["precision"].get<std::string>() + "):\n";
  const double step = r["step_s"].get<double>();
  out += format("  step %.3f s: gradients %.3f s, optimizer %.3f s", step, r["gradients_s"].get<double>(),
                r["optimizer_s"].get<double>());
  if (r.contains("forward_s"))
    out += format(" (forward %.3f s, backward %.3f s)", r["forward_s"].get<double>(), r["backward_s"].get<double>());
  out += "\n";
  out += format("  matrix products %.3f s a step (%.0f %%) at %.1f GFLOP/s; the same shapes alone %.1f GFLOP/s",
                r["products_s"].get<double>(), 100.0 * r["products_share"].get<double>(),
                r["products_gflops"].get<double>(), r["peak_gflops"].get<double>());
  out += format(" (%.0f %% of that peak)\n", 100.0 * r["peak_share"].get<double>());
  out += "  slowest shapes (kind M x N x K, calls a step, ms a step, GFLOP/s, alone):\n";
  int shown = 0;
  for (const json& s : r["shapes"]) {
    if (++shown > 8) break;
    char buf[200];
    std::snprintf(buf, sizeof buf, "    %-11s %5lld x %5lld x %5lld  %4.1f  %7.1f  %6.1f  %6.1f\n",
                  s["kind"].get<std::string>().c_str(), static_cast<long long>(s["M"].get<int64_t>()),
                  static_cast<long long>(s["N"].get<int64_t>()), static_cast<long long>(s["K"].get<int64_t>()),
                  s["calls_per_step"].get<double>(), 1e3 * s["seconds_per_step"].get<double>(),
                  s["gflops"].get<double>(), s["peak_gflops"].get<double>());
    out += buf;
  }
  return out;
}

}  // namespace hymba
