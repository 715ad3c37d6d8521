// Runs the test cases of this executable with Catch2's command line (catch_impl.cpp).
#pragma once

int run_catch_session(int argc, char* argv[]);
