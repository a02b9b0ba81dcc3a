//===- FdCapture.cpp - Capture what a file descriptor receives ------------===//

#include "FdCapture.h"

#include <stdexcept>
#include <unistd.h>

using loom::python::FdCapture;

FdCapture::FdCapture(int fd) : fd(fd) {
  file = std::tmpfile();
  saved = file ? ::dup(fd) : -1;
  if (saved < 0 || ::dup2(::fileno(file), fd) < 0) {
    if (saved >= 0)
      ::close(saved);
    if (file)
      std::fclose(file);
    saved = -1;
    throw std::runtime_error("loom: cannot redirect file descriptor " +
                             std::to_string(fd) + " to capture output");
  }
}

std::string FdCapture::finish() {
  std::string text;
  if (saved < 0)
    return text;
  ::dup2(saved, fd);
  ::close(saved);
  saved = -1;
  std::rewind(file);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;)
    text.append(buf, n);
  std::fclose(file);
  return text;
}

std::mutex &loom::python::captureMutex() {
  static std::mutex mutex;
  return mutex;
}
