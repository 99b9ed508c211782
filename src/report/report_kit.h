// Pieces every report writer shares (`hymba ablate`, `hymba synth`): tables
// in markdown and HTML with the best cells highlighted, escaping, and gnuplot
// charts rendered to PNG and SVG.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hymba::report {

// A table of text cells; highlight[r][c] marks the best value of a column.
// The first column is the row number, added by the renderers.
struct TextTable {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> cells;
  std::vector<std::vector<bool>> highlight;  // empty, or the shape of cells
};
std::string markdown_table(const TextTable& t);  // best cells in **bold**
std::string html_table(const TextTable& t);      // best cells with class "best"
// The <style> of report pages (tables, plots, samples).
const char* html_style();

std::string md_escape(const std::string& s);
// A CSV field, quoted when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);
// One number through a printf format ("%.3f").
std::string fmt(const char* format, double v);
std::string html_escape(const std::string& s);
// Escaped text with markdown's `inline code` as <code> (the report's prose is written as markdown).
std::string html_inline(const std::string& s);
// The subset of markdown the reports write, as HTML: #/##/### headings,
// paragraphs, "- " lists, pipe tables (header, alignment row, body; \| is a
// literal bar), fenced code, and inline `code` and **bold**. Everything else
// is escaped text, so no input can inject markup.
std::string markdown_to_html(const std::string& md);
// For each point of a scatter, the label slot: 0, or the next free one when an
// earlier point sits within a few percent of the plot (so labels do not overlap).
std::vector<int> label_slots(const std::vector<double>& xs, const std::vector<double>& ys);
// A gnuplot string literal, and a string column of a gnuplot data file.
std::string gp_str(const std::string& s);
std::string gp_data_str(const std::string& s);

// The gnuplot program to run (a name on PATH or a path), or nullopt with the
// reason it is missing; "" means plots were turned off.
std::optional<std::string> find_gnuplot(const std::string& name, std::string& why);

// Renders each (name, gnuplot commands) chart as DIR/name.png and name.svg
// through one script DIR/report.gp (data files must already be in DIR).
// False, with the reason in `why`, when gnuplot fails or leaves a chart out.
bool render_charts(const std::string& gnuplot, const std::string& dir,
                   const std::vector<std::pair<std::string, std::string>>& charts, std::string& why);

}  // namespace hymba::report
