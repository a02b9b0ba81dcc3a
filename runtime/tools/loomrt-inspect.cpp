//===- loomrt-inspect.cpp - Print the tensors of a safetensors file -------===//

#include "loomrt/Safetensors.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  static const char kUsage[] =
      "usage: loomrt-inspect FILE.safetensors\n"
      "Validates FILE and prints each tensor as 'name dtype [shape] nbytes',\n"
      "then each metadata entry as '__metadata__ key=value'.\n";
  std::string arg = argc == 2 ? argv[1] : "";
  if (arg == "-h" || arg == "--help")
    return std::fputs(kUsage, stdout) < 0;
  if (argc != 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string error;
  auto file = loomrt::SafetensorsFile::open(argv[1], &error);
  if (!file) {
    std::fprintf(stderr, "loomrt-inspect: error: %s\n", error.c_str());
    return 1;
  }
  std::fputs(loomrt::formatSafetensorsSummary(*file).c_str(), stdout);
  return 0;
}
