// The device query a test hands to the code under test: the backend test_backend() names, opened on the
// host at `root` (which must be loaded). The emulator the test drives the host with stays separate.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "ascend/npu/backend.h"
#include "test_backend.h"

namespace ascend::testing {

inline std::unique_ptr<npu::DeviceQuery> open_test_query(const std::string& root) {
  npu::BackendOptions o;
  auto b = npu::parse_backend(test_backend());
  EXPECT_TRUE(b.ok()) << b.error().message();
  o.backend = b ? *b : npu::Backend::kEmulator;
  o.root = root;
  auto q = npu::open_device_query(o);
  EXPECT_TRUE(q.ok()) << q.error().message();
  return q ? std::move(*q) : nullptr;
}

}  // namespace ascend::testing
