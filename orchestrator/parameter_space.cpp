#include "orchestrator/parameter_space.h"

#include <algorithm>

#include "common/error.h"

namespace fanout {

const std::string* ParameterPoint::find(const std::string& name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if ((*names)[i] == name) return &values[i];
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> ParameterPoint::pairs() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) out.emplace_back((*names)[i], values[i]);
  return out;
}

int ParameterSpace::axis_of(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (std::find(axes_[i].names.begin(), axes_[i].names.end(), name) != axes_[i].names.end()) return int(i);
  return -1;
}

bool ParameterSpace::has(const std::string& name) const { return axis_of(name) >= 0; }

void ParameterSpace::add(const std::string& name, std::vector<std::string> values) {
  if (has(name)) throw UserError("parameter '" + name + "' is declared twice");
  if (values.empty()) throw UserError("parameter '" + name + "' has no values");
  Axis axis;
  axis.names = {name};
  for (auto& v : values) axis.values.push_back({std::move(v)});
  axes_.push_back(std::move(axis));
}

void ParameterSpace::zip(const std::vector<std::string>& names, const std::string& origin) {
  if (names.size() < 2) throw UserError(origin + ": a zip needs at least two parameters");
  std::vector<int> idx;
  for (auto& n : names) {
    int a = axis_of(n);
    if (a < 0) throw UserError(origin + ": zip names unknown parameter '" + n + "'");
    if (axes_[a].names.size() != 1) throw UserError(origin + ": parameter '" + n + "' is already zipped");
    if (std::find(idx.begin(), idx.end(), a) != idx.end())
      throw UserError(origin + ": parameter '" + n + "' is named twice in the zip");
    idx.push_back(a);
  }
  size_t len = axes_[idx[0]].values.size();
  for (size_t i = 1; i < idx.size(); ++i)
    if (axes_[idx[i]].values.size() != len)
      throw UserError(origin + ": zipped parameters must have lists of equal length ('" + names[0] + "' has " +
                      std::to_string(len) + ", '" + names[i] + "' has " +
                      std::to_string(axes_[idx[i]].values.size()) + ")");
  Axis zipped;
  zipped.names = names;
  zipped.values.assign(len, {});
  for (size_t row = 0; row < len; ++row)
    for (int a : idx) zipped.values[row].push_back(axes_[a].values[row][0]);
  int at = *std::min_element(idx.begin(), idx.end());
  axes_[at] = std::move(zipped);
  std::sort(idx.begin(), idx.end(), std::greater<>());
  for (int a : idx)
    if (a != at) axes_.erase(axes_.begin() + a);
}

void ParameterSpace::exclude(Exclusion rule) {
  if (rule.conditions.empty()) throw UserError(rule.origin + ": an exclusion needs at least one condition");
  for (auto& [name, values] : rule.conditions)
    if (!has(name)) throw UserError(rule.origin + ": exclusion names unknown parameter '" + name + "'");
  exclusions_.push_back(std::move(rule));
}

std::optional<uint64_t> ParameterSpace::cardinality() const {
  uint64_t n = 1;
  for (auto& a : axes_)
    if (__builtin_mul_overflow(n, uint64_t(a.values.size()), &n)) return std::nullopt;
  return n;
}

void ParameterSpace::for_each(const std::function<void(ParameterPoint&&)>& visit) const {
  const auto total = cardinality();
  if (!total) throw UserError("the parameter lists give more than 2^64 permutations");
  auto all_names = std::make_shared<std::vector<std::string>>();
  for (auto& a : axes_) all_names->insert(all_names->end(), a.names.begin(), a.names.end());
  const std::shared_ptr<const std::vector<std::string>> names = std::move(all_names);
  std::vector<size_t> pos(axes_.size(), 0);
  for (uint64_t k = 0; k < *total; ++k) {
    ParameterPoint p;
    p.names = names;
    p.values.reserve(names->size());
    for (size_t a = 0; a < axes_.size(); ++a)
      for (size_t j = 0; j < axes_[a].names.size(); ++j) p.values.push_back(axes_[a].values[pos[a]][j]);
    bool excluded = std::any_of(exclusions_.begin(), exclusions_.end(), [&](const Exclusion& e) {
      return std::all_of(e.conditions.begin(), e.conditions.end(), [&](const auto& c) {
        const std::string* v = p.find(c.first);
        return v && std::find(c.second.begin(), c.second.end(), *v) != c.second.end();
      });
    });
    if (!excluded) visit(std::move(p));
    // Advance the odometer: last axis fastest.
    for (size_t a = axes_.size(); a-- > 0;) {
      if (++pos[a] < axes_[a].values.size()) break;
      pos[a] = 0;
    }
  }
}

std::vector<ParameterPoint> ParameterSpace::expand() const {
  std::vector<ParameterPoint> out;
  for_each([&](ParameterPoint&& p) { out.push_back(std::move(p)); });
  return out;
}

}  // namespace fanout
