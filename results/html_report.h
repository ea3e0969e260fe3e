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
// models: the scaling models (results/models.h), listed in a Models section after the headline plots.
void write_html_report(const ExperimentStats& exp, const std::vector<Plot>& plots, const std::filesystem::path& file,
                       const std::vector<FigureModel>& models = {});

}  // namespace fanout
