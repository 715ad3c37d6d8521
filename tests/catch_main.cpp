// Main of the tests that run anywhere (the GPU tests have gpu/gpu_main.cpp).
#include "catch_session.hpp"

int main(int argc, char* argv[]) { return run_catch_session(argc, argv); }
