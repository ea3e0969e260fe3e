// A list that copies share rather than duplicate: read-only once made, so a copy costs a reference count.
// Planned runs whose steps are equal (a permutation's --repeat runs among them) hold one list (a copy each was
// 270 B a run of a one-step sweep: 27 MB of a 100,000-run sweep's driver).
#pragma once
#include <memory>
#include <vector>

namespace fanout {

template <class T>
class SharedList {
 public:
  SharedList() = default;
  SharedList(std::vector<T> items) : items_(items.empty() ? nullptr : std::make_shared<const std::vector<T>>(std::move(items))) {}
  const std::vector<T>& get() const { return items_ ? *items_ : none(); }
  operator const std::vector<T>&() const { return get(); }
  size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }
  const T& operator[](size_t i) const { return get()[i]; }
  const T& front() const { return get().front(); }
  const T& back() const { return get().back(); }
  typename std::vector<T>::const_iterator begin() const { return get().begin(); }
  typename std::vector<T>::const_iterator end() const { return get().end(); }

 private:
  static const std::vector<T>& none() {
    static const std::vector<T> nothing;
    return nothing;
  }
  std::shared_ptr<const std::vector<T>> items_;
};

}  // namespace fanout
