// The program that makes the tests' precompiled header (tests/CMakeLists.txt): no tests of its own.
