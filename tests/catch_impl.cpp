// Catch2's implementation, compiled once for every test executable; catch_main.cpp and
// gpu/gpu_main.cpp each add only a main, which runs the tests through run_catch_session
// (Catch2 declares its Session only where its implementation is compiled).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

int run_catch_session(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
