//===- loom-run.cpp - Run, train and export a compiled Loom artifact ------===//
//
// The whole command line lives in libloomrt (src/tool/LoomRun.cpp) so that
// tests and embedders can call it; see docs/loom-run.md.
//
//===----------------------------------------------------------------------===//

#include "loomrt/LoomRun.h"

int main(int argc, char **argv) { return loomrt::loomRunMain(argc, argv); }
