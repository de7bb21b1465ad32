#pragma once

// Whether this test program is built under AddressSanitizer (scripts/test --sanitize, cmake/sanitize.cmake).
// A test that repeats one scenario many times to hunt races in a protocol runs fewer rounds there: what the
// sanitizers add (memory and undefined-behaviour checks of the code the rounds run) the first rounds already
// give, and the sanitizer step has to fit in CI's time budget.

namespace ascend::testing {

#if defined(__SANITIZE_ADDRESS__)  // GCC
inline constexpr bool kUnderSanitizers = true;
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderSanitizers = true;
#else
inline constexpr bool kUnderSanitizers = false;
#endif
#else
inline constexpr bool kUnderSanitizers = false;
#endif

}  // namespace ascend::testing
