// One self-contained HTML page per experiment: summary, per-metric tables, and the plots embedded as
// data: URIs (no other files needed to view it).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

struct ExperimentStats;
struct Plot;
struct FigureModel;

std::string html_escape(const std::string& s);
std::string base64(const std::string& bytes);
// What every page of ours starts and ends with: the head with its style, and the script that marks the body
// data-plots-rendered (and data-first-plot) once every img.plot has decoded, for a headless browser's check.
std::string html_page_head(const std::string& title);
std::string html_page_end();
// models: the scaling models (results/models.h), listed in a Models section after the headline plots.
void write_html_report(const ExperimentStats& exp, const std::vector<Plot>& plots, const std::filesystem::path& file,
                       const std::vector<FigureModel>& models = {});

}  // namespace fanout
