// Which backend of the device seam a test runs against (add_ascend_test ... BACKENDS in tests/CMakeLists.txt
// runs such tests once per backend): $ASCEND_TEST_BACKEND, "emulator" when unset (the test binary run by
// hand). Tests pass it on as the plugin's --backend or the runtime's `backend:` key.
#pragma once

#include <cstdlib>
#include <string>

namespace ascend::testing {

inline std::string test_backend() {
  const char* b = std::getenv("ASCEND_TEST_BACKEND");
  return b != nullptr && *b != '\0' ? b : "emulator";
}

}  // namespace ascend::testing
