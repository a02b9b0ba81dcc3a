//===- loom-interp.cpp - Reference interpreter of the loom dialect --------===//

#include "loom/Interp/InterpTool.h"

int main(int argc, char **argv) { return loom::interp::interpMain(argc, argv); }
