//===- loomc.cpp - Loom's compiler driver ---------------------------------===//

#include "loom/Driver/Loomc.h"

int main(int argc, char **argv) { return loom::loomcMain(argc, argv); }
