#include "ascend/deviceinfo/dra_names.h"

#include <algorithm>
#include <charconv>

namespace ascend::deviceinfo {

namespace {
constexpr std::string_view kPrefix = "npu-";
}  // namespace

std::string device_name(int phy) {
  return std::string(kPrefix) + std::to_string(phy);
}

Result<int> phy_of_device(std::string_view device) {
  const auto bad = [&] {
    return Error::invalid("device \"" + std::string(device.substr(0, 64)) + "\" is not one of driver " +
                          kDraDriver + "'s chips (npu-<phy id>)");
  };
  if (!device.starts_with(kPrefix) || device.size() == kPrefix.size() || device.size() > kPrefix.size() + 4)
    return bad();
  const auto digits = device.substr(kPrefix.size());
  if (digits[0] < '0' || digits[0] > '9') return bad();     // from_chars would take "-1"
  if (digits.size() > 1 && digits[0] == '0') return bad();  // "npu-03" is not the name we publish
  int phy = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), phy);
  if (ec != std::errc() || end != digits.data() + digits.size()) return bad();
  return phy;
}

std::string vnpu_device_name(int phy, std::string_view tmpl, int k) {
  std::string t(tmpl);
  std::replace(t.begin(), t.end(), '_', '-');
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return device_name(phy) + "-" + t + "-" + std::to_string(k);
}

bool is_vnpu_device_name(std::string_view device) {
  if (!device.starts_with(kPrefix)) return false;
  const auto rest = device.substr(kPrefix.size());
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 >= rest.size() || rest.back() == '-')
    return false;
  const auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  return std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(dash), is_digit) &&
         std::all_of(rest.begin() + static_cast<std::ptrdiff_t>(dash), rest.end(),
                     [&](char ch) { return is_digit(ch) || (ch >= 'a' && ch <= 'z') || ch == '-'; });
}

Result<int> chip_of_device(std::string_view device) {
  if (!is_vnpu_device_name(device)) return phy_of_device(device);
  auto phy = phy_of_device(device.substr(0, kPrefix.size() + device.substr(kPrefix.size()).find('-')));
  if (!phy.ok())
    return Error::invalid("device \"" + std::string(device.substr(0, 64)) + "\" is on no chip of driver " +
                          kDraDriver);
  return phy;
}

}  // namespace ascend::deviceinfo
