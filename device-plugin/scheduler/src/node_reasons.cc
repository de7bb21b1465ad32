// NodeReasons (extender.h): the failed nodes of a filter, by name, without a map entry and a copy of the
// reason per node.
#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "ascend/scheduler/extender.h"

namespace ascend::scheduler {

NodeReasons::NodeReasons(std::initializer_list<std::pair<std::string, std::string>> items) {
  for (const auto& [name, text] : items) set(name, text);
}

std::uint32_t NodeReasons::reason(std::string_view text) {
  if (!reasons_.empty() && reasons_.back() == text) return static_cast<std::uint32_t>(reasons_.size() - 1);
  reasons_.emplace_back(text);
  return static_cast<std::uint32_t>(reasons_.size() - 1);
}

void NodeReasons::reserve(std::size_t nodes) {
  entries_.reserve(nodes);
  names_.reserve(names_.size() + nodes * 16);  // most node names are shorter
  if (sorted_) order_.reserve(nodes);
}

void NodeReasons::add(std::string_view name, std::uint32_t r, std::uint32_t rank) {
  if (sorted_ && !order_.empty()) {
    // Still in order while each name comes after the greatest so far (a list in name order, one name).
    const Entry& last = entries_[order_.back()];
    bool after = last.rank != kNoRank && rank != kNoRank ? last.rank < rank : this->name(last) < name;
    if (!after) sorted_ = false;
  }
  if (name.size() > UINT32_MAX - names_.size()) throw std::length_error("NodeReasons: names over 4 GiB");
  entries_.push_back(
      Entry{static_cast<std::uint32_t>(names_.size()), static_cast<std::uint32_t>(name.size()), r, rank});
  names_.append(name);
  if (sorted_) order_.push_back(static_cast<std::uint32_t>(entries_.size() - 1));
}

bool NodeReasons::less(const Entry& a, const Entry& b) const {
  if (a.rank != kNoRank && b.rank != kNoRank) return a.rank < b.rank;
  return name(a) < name(b);
}

void NodeReasons::sort() const {
  if (sorted_) return;
  std::vector<std::uint32_t> order(entries_.size());
  std::iota(order.begin(), order.end(), 0U);
  std::stable_sort(order.begin(), order.end(),
                   [this](std::uint32_t a, std::uint32_t b) { return less(entries_[a], entries_[b]); });
  // Of the entries of one name, the last given stays (stable: it is the last of its run).
  order_.clear();
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i + 1 < order.size() && !less(entries_[order[i]], entries_[order[i + 1]])) continue;
    order_.push_back(order[i]);
  }
  sorted_ = true;
}

std::size_t NodeReasons::size() const {
  sort();
  return order_.size();
}

const std::string* NodeReasons::find(std::string_view name) const {
  sort();
  auto it = std::lower_bound(order_.begin(), order_.end(), name, [this](std::uint32_t e, std::string_view n) {
    return this->name(entries_[e]) < n;
  });
  if (it == order_.end() || this->name(entries_[*it]) != name) return nullptr;
  return &reasons_[entries_[*it].reason];
}

const std::string& NodeReasons::at(std::string_view name) const {
  const std::string* r = find(name);
  if (r == nullptr) throw std::out_of_range("no reason for node " + std::string(name));
  return *r;
}

NodeReasons::iterator NodeReasons::begin() const {
  sort();
  return iterator(this, 0);
}

NodeReasons::iterator NodeReasons::end() const {
  sort();
  return iterator(this, order_.size());
}

NodeReasons::Item NodeReasons::iterator::operator*() const {
  const Entry& e = r_->entries_[r_->order_[i_]];
  return Item{r_->name(e), r_->reasons_[e.reason]};
}

std::uint32_t NodeReasons::iterator::reason() const {
  return r_->entries_[r_->order_[i_]].reason;
}

}  // namespace ascend::scheduler
