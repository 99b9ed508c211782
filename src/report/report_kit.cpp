#include "report/report_kit.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"

namespace hymba::report {

namespace fs = std::filesystem;

namespace {

bool highlighted(const TextTable& t, size_t r, size_t c) {
  return r < t.highlight.size() && c < t.highlight[r].size() && t.highlight[r][c];
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string html_inline(const std::string& s) {
  std::string out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t open = s.find('`', at);
    const size_t close = open == std::string::npos ? open : s.find('`', open + 1);
    if (close == std::string::npos) break;  // an unpaired backtick stays as text
    out += html_escape(s.substr(at, open - at)) + "<code>" + html_escape(s.substr(open + 1, close - open - 1)) + "</code>";
    at = close + 1;
  }
  return out + html_escape(s.substr(at));
}

namespace {

// Inline markdown: `code` spans first (their text is literal), then **bold**
// in the text between them.
std::string inline_html(const std::string& s) {
  std::string out;
  size_t at = 0;
  const auto text = [](const std::string& t) {
    std::string h;
    size_t i = 0;
    bool open = false;
    while (i < t.size()) {
      if (t.compare(i, 2, "**") == 0 && (open || t.find("**", i + 2) != std::string::npos)) {
        h += open ? "</strong>" : "<strong>";
        open = !open;
        i += 2;
      } else {
        h += html_escape(t.substr(i, 1));
        ++i;
      }
    }
    return h;
  };
  while (at < s.size()) {
    const size_t open = s.find('`', at);
    const size_t close = open == std::string::npos ? open : s.find('`', open + 1);
    if (close == std::string::npos) break;
    out += text(s.substr(at, open - at)) + "<code>" + html_escape(s.substr(open + 1, close - open - 1)) + "</code>";
    at = close + 1;
  }
  return out + text(s.substr(at));
}

// The cells of a pipe-table row, with \| kept as a literal bar.
std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  size_t i = line.find('|') + 1;
  for (; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  if (cell.find_first_not_of(' ') != std::string::npos) cells.push_back(cell);
  for (std::string& c : cells) {
    const size_t b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
    c = b == std::string::npos ? "" : c.substr(b, e - b + 1);
  }
  return cells;
}

bool is_alignment_row(const std::string& line) {
  return line.find_first_not_of("|:- ") == std::string::npos && line.find('-') != std::string::npos;
}

}  // namespace

std::string markdown_to_html(const std::string& md) {
  std::vector<std::string> lines;
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::ostringstream h;
  std::string paragraph;
  const auto flush = [&] {
    if (!paragraph.empty()) h << "<p>" << inline_html(paragraph) << "</p>\n";
    paragraph.clear();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("```", 0) == 0) {  // fenced code, to the closing fence or the end
      flush();
      h << "<pre>";
      for (++i; i < lines.size() && lines[i].rfind("```", 0) != 0; ++i) h << html_escape(lines[i]) << "\n";
      h << "</pre>\n";
    } else if (line.rfind("#", 0) == 0) {
      flush();
      const size_t level = std::min<size_t>(line.find_first_not_of('#'), 6);
      const size_t start = line.find_first_not_of(' ', level);
      h << "<h" << level << ">" << inline_html(start == std::string::npos ? "" : line.substr(start)) << "</h" << level
        << ">\n";
    } else if (line.rfind("- ", 0) == 0) {
      flush();
      h << "<ul>\n";
      for (; i < lines.size() && lines[i].rfind("- ", 0) == 0; ++i) h << "<li>" << inline_html(lines[i].substr(2)) << "</li>\n";
      --i;
      h << "</ul>\n";
    } else if (line.rfind("|", 0) == 0 && i + 1 < lines.size() && is_alignment_row(lines[i + 1])) {
      flush();
      h << "<table>\n<tr>";
      for (const std::string& c : table_cells(line)) h << "<th>" << inline_html(c) << "</th>";
      h << "</tr>\n";
      for (i += 2; i < lines.size() && lines[i].rfind("|", 0) == 0; ++i) {
        h << "<tr>";
        for (const std::string& c : table_cells(lines[i])) h << "<td>" << inline_html(c) << "</td>";
        h << "</tr>\n";
      }
      --i;
      h << "</table>\n";
    } else if (line.find_first_not_of(' ') == std::string::npos) {
      flush();
    } else {
      paragraph += (paragraph.empty() ? "" : " ") + line;
    }
  }
  flush();
  return h.str();
}

// A label row for each point of a scatter: points closer than a few percent of
// the plot to an earlier one get the next free slot, so names like "Hymba" and
// "Hymba-NoMeta" at almost the same place are not printed on top of each other.
std::vector<int> label_slots(const std::vector<double>& xs, const std::vector<double>& ys) {
  const auto span = [](const std::vector<double>& v) {
    double lo = 0, hi = 0;
    bool any = false;
    for (double x : v)
      if (std::isfinite(x)) {
        lo = any ? std::min(lo, x) : x;
        hi = any ? std::max(hi, x) : x;
        any = true;
      }
    return hi > lo ? hi - lo : 1.0;
  };
  const double sx = span(xs), sy = span(ys);
  std::vector<int> slots(xs.size(), 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<bool> taken(xs.size() + 1, false);
    for (size_t j = 0; j < i; ++j)
      if (std::fabs(xs[i] - xs[j]) < 0.25 * sx && std::fabs(ys[i] - ys[j]) < 0.08 * sy)
        taken[static_cast<size_t>(slots[j])] = true;
    while (taken[static_cast<size_t>(slots[i])]) ++slots[i];
  }
  return slots;
}

// Single quotes take no escapes but ''.
std::string gp_str(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c == '\n' ? ' ' : c);
  return out + "'";
}

std::string gp_data_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"' || c == '\n') ? '\'' : c;
  return out + "\"";
}

std::string markdown_table(const TextTable& t) {
  std::ostringstream md;
  md << "| # |";
  for (const std::string& h : t.headers) md << " " << md_escape(h) << " |";
  md << "\n|--:|";
  for (size_t c = 0; c < t.headers.size(); ++c) md << (c == 0 ? ":--|" : "--:|");
  md << "\n";
  for (size_t r = 0; r < t.cells.size(); ++r) {
    md << "| " << r + 1 << " |";
    for (size_t c = 0; c < t.cells[r].size(); ++c) {
      const std::string text = md_escape(t.cells[r][c]);
      md << " " << (highlighted(t, r, c) ? "**" + text + "**" : text) << " |";
    }
    md << "\n";
  }
  return md.str();
}

std::string html_table(const TextTable& t) {
  std::ostringstream h;
  h << "<table>\n<tr><th>#</th>";
  for (const std::string& s : t.headers) h << "<th>" << html_escape(s) << "</th>";
  h << "</tr>\n";
  for (size_t r = 0; r < t.cells.size(); ++r) {
    h << "<tr><td>" << r + 1 << "</td>";
    for (size_t c = 0; c < t.cells[r].size(); ++c)
      h << (highlighted(t, r, c) ? "<td class=\"best\">" : "<td>") << html_escape(t.cells[r][c]) << "</td>";
    h << "</tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

const char* html_style() {
  // Wide tables (the ablation table has 24 columns) scroll inside the page instead of being cut off.
  return "<style>body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;"
         "font-size:14px;display:block;overflow-x:auto;max-width:100%}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f0f0f0}"
         "td:nth-child(2){text-align:left}td.best{font-weight:bold;background:#e8f5e9}pre{background:#f7f7f7;"
         "padding:8px;white-space:pre-wrap}img{max-width:100%;margin:1em 0}</style>";
}

std::optional<std::string> find_gnuplot(const std::string& name, std::string& why) {
  if (name.empty()) {
    why = "plots skipped (--no-plots)";
    return std::nullopt;
  }
  auto runnable = [](const fs::path& p) { return fs::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0; };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) return name;
    why = "plots skipped: " + name + " is not an executable gnuplot";
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string d;
  while (std::getline(dirs, d, ':'))
    if (!d.empty() && runnable(fs::path(d) / name)) return (fs::path(d) / name).string();
  why = "plots skipped: gnuplot not found (install gnuplot-nox, or pass --gnuplot PATH)";
  return std::nullopt;
}

bool render_charts(const std::string& gnuplot, const std::string& dir_name,
                   const std::vector<std::pair<std::string, std::string>>& charts, std::string& why) {
  const fs::path dir(dir_name);
  std::ostringstream body;
  for (const char* term : {"pngcairo size 1000,600 font ',10'", "svg size 1000,600 dynamic font 'sans,11'"}) {
    const std::string ext = std::string(term).starts_with("png") ? ".png" : ".svg";
    for (const auto& [name, chart] : charts)
      body << "reset\nset terminal " << term << "\nset output " << gp_str(name + ext) << "\n" << chart
           << "unset output\n";
  }
  write_text_atomic((dir / "report.gp").string(), body.str());
  for (const auto& chart : charts)
    for (const char* ext : {".png", ".svg"}) fs::remove(dir / (chart.first + ext));

  const std::string cmd = "cd " + shell_quote(dir.string()) + " && " + shell_quote(gnuplot) +
                          " report.gp > gnuplot.log 2>&1";
  const int rc = std::system(cmd.c_str());
  bool all = true;
  for (const auto& chart : charts)
    for (const char* ext : {".png", ".svg"}) {
      const fs::path f = dir / (chart.first + ext);
      all = all && fs::exists(f) && fs::file_size(f) > 0;
    }
  if (rc != 0 || !all) {
    why = "plots skipped: gnuplot failed (exit " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) + "; see " +
          (dir / "gnuplot.log").string() + ")";
    return false;
  }
  return true;
}

}  // namespace hymba::report
