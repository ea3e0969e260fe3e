// One self-contained HTML page per experiment: summary, per-metric tables, and the plots embedded as
// data: URIs (no other files needed to view it).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

struct ExperimentStats;
struct Plot;

std::string html_escape(const std::string& s);
void write_html_report(const ExperimentStats& exp, const std::vector<Plot>& plots, const std::filesystem::path& file);

}  // namespace fanout
