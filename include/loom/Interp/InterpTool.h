//===- InterpTool.h - The loom-interp command line --------------*- C++ -*-===//

#ifndef LOOM_INTERP_INTERPTOOL_H
#define LOOM_INTERP_INTERPTOOL_H

namespace loom::interp {
/// Runs `loom-interp` with the given command line; returns the process exit
/// code (0 success, 1 failure, 2 bad usage).
int interpMain(int argc, char **argv);
} // namespace loom::interp

#endif // LOOM_INTERP_INTERPTOOL_H
