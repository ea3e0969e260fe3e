// The parameter space of an experiment, declared once and expanded in one step into concrete points.
//   axes      : each axis is one parameter with its values, or a zipped group of parameters whose values
//               advance together; the points are the cartesian product of the axes, first axis outermost
//               (itertools.product order, as SmartSim-Scaling).
//   exclusions: a point is dropped when it matches every condition of any exclusion rule.
#pragma once
#include <cstdint>
#include <functional>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fanout {

struct Axis {
  std::vector<std::string> names;               // one name, or several for a zipped group
  std::vector<std::vector<std::string>> values;  // values[i] = the i-th value of each name (same order as names)
};

struct Exclusion {
  std::map<std::string, std::vector<std::string>> conditions;  // name -> values that match
  std::string origin;                                          // for error messages: "--exclude", "file:line"
  std::filesystem::path base;  // where a relative file value is found: the experiment file's folder ("" : the cwd)
};

// One concrete point: a value per parameter, in declaration order. The names are the space's, one list shared by
// every point it makes (they were half of a planned run's memory when each point held its own).
struct ParameterPoint {
  std::shared_ptr<const std::vector<std::string>> names;
  std::vector<std::string> values;  // values[i] is name(i)'s
  size_t size() const { return values.size(); }
  const std::string& name(size_t i) const { return (*names)[i]; }
  const std::string* find(const std::string& name) const;
  std::vector<std::pair<std::string, std::string>> pairs() const;  // (name, value) in order, as runs store them
};

class ParameterSpace {
 public:
  // A single parameter, scalar or list. Throws UserError if the name is already declared.
  void add(const std::string& name, std::vector<std::string> values);
  // Turns already-declared parameters into one zipped axis (at the position of the first). Their lists
  // must have equal lengths; `origin` names the flag or file location in errors.
  void zip(const std::vector<std::string>& names, const std::string& origin);
  void exclude(Exclusion rule);

  bool has(const std::string& name) const;
  bool has_exclusions() const { return !exclusions_.empty(); }
  const std::vector<Axis>& axes() const { return axes_; }
  // Number of points before exclusions; nullopt when it does not fit in 64 bits.
  std::optional<uint64_t> cardinality() const;
  // Visits the points that no exclusion drops, in order, one at a time (memory does not grow with the count).
  void for_each(const std::function<void(ParameterPoint&&)>& visit) const;
  std::vector<ParameterPoint> expand() const;

 private:
  int axis_of(const std::string& name) const;
  std::vector<Axis> axes_;
  std::vector<Exclusion> exclusions_;
};

}  // namespace fanout
