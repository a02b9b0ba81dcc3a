//===- FdCapture.cpp - Capture output; run work in a child process --------===//
//
// runIsolated forks: the child points fd 1 and 2 at temporary files,
// resets the signal handlers it inherited (Python's, pytest's
// faulthandler's) to the default, installs LLVM's (a stack dump, then the
// signal's default action), runs the work, writes its result to a third
// file and leaves with _exit(). A page shared with the parent says whether
// the work returned or the child called exit() (on_exit sees that, as
// llvm::report_fatal_error ends with exit(1)). The parent waits on a
// close-on-exec pipe whose write end only the child holds: it reads as
// closed when the child is gone, and the wait wakes every 100 ms to ask
// whether Python wants to stop (Ctrl-C).
//
//===----------------------------------------------------------------------===//

#include "FdCapture.h"

#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <poll.h>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using loom::python::FdCapture;
using loom::python::IsolatedRun;

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

namespace {

/// An anonymous temporary file, read back from its start.
struct TempFile {
  std::FILE *file = std::tmpfile();
  ~TempFile() {
    if (file)
      std::fclose(file);
  }
  int fd() const { return file ? ::fileno(file) : -1; }
  std::string readAll() const {
    std::string text;
    if (!file || ::lseek(fd(), 0, SEEK_SET) < 0)
      return text;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd(), buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      text.append(buf, size_t(n));
    }
    return text;
  }
};

/// What the child tells the parent, in a page both map.
struct ChildState {
  volatile int finished;
  volatile int exited;
  volatile int code;
};

ChildState *childState = nullptr; // in the child only

bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}

void flushOutput() {
  llvm::outs().flush();
  llvm::errs().flush();
  std::fflush(stdout);
  std::fflush(stderr);
}

/// exit() in the child (report_fatal_error's end): note it and leave at
/// once, before the static destructors and the atexit handlers of the
/// parent's libraries run in a process that is only a copy.
void onChildExit(int status, void *) {
  childState->exited = 1;
  childState->code = status;
  flushOutput();
  ::_exit(status);
}

/// The child's signal handlers: the default for every signal the parent
/// handles (Python's handlers would run Python in the child and write to
/// its wakeup descriptor), SIGCHLD's default too (the linker and ptxas are
/// waited for), then LLVM's crash handlers, which print the stack dump and
/// re-raise the signal.
void resetSignals(const char *programName) {
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP)
      continue;
    struct sigaction old;
    if (::sigaction(sig, nullptr, &old) != 0)
      continue;
    bool handled = (old.sa_flags & SA_SIGINFO) ||
                   (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN);
    if (handled || sig == SIGCHLD) {
      struct sigaction dfl;
      std::memset(&dfl, 0, sizeof dfl);
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      ::sigaction(sig, &dfl, nullptr);
    }
  }
  llvm::setBugReportMsg("PLEASE report this crash of Loom's compiler with "
                        "the input and the options that made it.\n");
  // First the bug report message and "Stack dump:" with the
  // PrettyStackTrace entries the work declares, then the backtrace (the
  // order of InitLLVM's).
  llvm::EnablePrettyStackTrace();
  llvm::sys::PrintStackTraceOnErrorSignal(programName,
                                          /*DisableCrashReporting=*/true);
}

[[noreturn]] void childMain(const std::function<int(std::string &)> &work,
                            const char *programName, int outFd, int errFd,
                            int resultFd) {
  ::dup2(outFd, 1);
  ::dup2(errFd, 2);
  resetSignals(programName);
  ::on_exit(onChildExit, nullptr);
  std::string result;
  int code;
  try {
    code = work(result);
  } catch (const std::exception &e) {
    llvm::errs() << programName << ": uncaught C++ exception: " << e.what()
                 << "\n";
    std::abort();
  } catch (...) {
    llvm::errs() << programName << ": uncaught C++ exception\n";
    std::abort();
  }
  flushOutput();
  if (!writeAll(resultFd, result.data(), result.size())) {
    llvm::errs() << programName
                 << ": cannot hand the result back: " << std::strerror(errno)
                 << "\n";
    std::abort();
  }
  childState->code = code;
  childState->finished = 1;
  ::_exit(code & 0xff);
}

/// The last line of `text` that contains `needle`, trimmed.
std::string lineWith(const std::string &text, const char *needle,
                     std::string *previous = nullptr) {
  size_t at = text.rfind(needle);
  if (at == std::string::npos)
    return "";
  size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = text.find('\n', at);
  if (previous && begin >= 2) {
    size_t prevBegin = text.rfind('\n', begin - 2);
    prevBegin = prevBegin == std::string::npos ? 0 : prevBegin + 1;
    *previous = text.substr(prevBegin, begin - 1 - prevBegin);
  }
  std::string line = text.substr(
      begin, end == std::string::npos ? std::string::npos : end - begin);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
    line.pop_back();
  return line;
}

} // namespace

std::string IsolatedRun::failure(const std::string &who) const {
  if (finished)
    return "";
  if (!startError.empty())
    return "cannot run " + who + " in a child process (" + startError +
           "); LOOM_NO_FORK=1 runs it in this process";
  // What LLVM said last: report_fatal_error's and llvm_unreachable's line.
  std::string why = lineWith(err, "LLVM ERROR: ");
  if (why.empty()) {
    std::string message;
    why = lineWith(err, "UNREACHABLE executed", &message);
    if (!why.empty() && !message.empty())
      why = message + " (" + why + ")";
  }
  std::string text;
  if (interrupted)
    text = who + " was interrupted";
  else if (signal)
    text = who + " crashed (signal " + std::to_string(signal) + ", " +
           strsignal(signal) + ")";
  else if (exited && !why.empty())
    text = who + " stopped on a fatal error (exit status " +
           std::to_string(code) + ")";
  else if (exited)
    text =
        who + " called exit(" + std::to_string(code) + ") before it finished";
  else if (!statusLost.empty())
    text = who + " ended before it finished, how is not known (" + statusLost +
           ": SIGCHLD is ignored in this process)";
  else
    text =
        who + " ended unexpectedly (exit status " + std::to_string(code) + ")";
  if (!why.empty() && !interrupted)
    text += ": " + why;
  return text;
}

IsolatedRun
loom::python::runIsolated(const std::function<int(std::string &)> &work,
                          const char *programName,
                          const std::function<bool()> &interrupted) {
  IsolatedRun run;
  TempFile out, err, result;
  if (out.fd() < 0 || err.fd() < 0 || result.fd() < 0) {
    run.startError = std::string("temporary file: ") + std::strerror(errno);
    return run;
  }
  void *page = ::mmap(nullptr, sizeof(ChildState), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    run.startError = std::string("mmap: ") + std::strerror(errno);
    return run;
  }
  auto *state = static_cast<ChildState *>(page);
  state->finished = state->exited = state->code = 0;
  int alive[2];
  if (::pipe2(alive, O_CLOEXEC) != 0) {
    run.startError = std::string("pipe: ") + std::strerror(errno);
    ::munmap(page, sizeof(ChildState));
    return run;
  }
  // Nothing buffered in this process may be written twice by the child.
  flushOutput();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(alive[0]);
    childState = state;
    childMain(work, programName, out.fd(), err.fd(), result.fd());
  }
  int forkErrno = errno;
  ::close(alive[1]);
  if (pid < 0) {
    run.startError = std::string("fork: ") + std::strerror(forkErrno);
    ::close(alive[0]);
    ::munmap(page, sizeof(ChildState));
    return run;
  }

  // Wait for the write end to close (the child is gone), asking
  // `interrupted` in between. (A process another thread forked meanwhile
  // may hold the write end too: waitpid is asked as well, unless SIGCHLD
  // is ignored, when the child is reaped by the kernel and only the pipe
  // tells.)
  int status = 0;
  pid_t waited = 0;
  bool reapable = true;
  for (;;) {
    struct pollfd p = {alive[0], POLLIN, 0};
    int n = ::poll(&p, 1, 100);
    if (n > 0)
      break;
    if (n < 0 && errno != EINTR)
      break; // waitpid below waits instead
    if (interrupted && interrupted()) {
      ::kill(pid, SIGKILL);
      run.interrupted = true;
      break;
    }
    if (reapable) {
      waited = ::waitpid(pid, &status, WNOHANG);
      if (waited > 0)
        break;
      reapable = waited == 0 || errno != ECHILD;
      waited = 0;
    }
  }
  ::close(alive[0]);
  int waitErrno = ECHILD;
  if (reapable) {
    while (waited == 0 || (waited < 0 && errno == EINTR))
      waited = ::waitpid(pid, &status, 0);
    waitErrno = errno;
  } else {
    waited = -1;
  }

  run.out = out.readAll();
  run.err = err.readAll();
  if (state->finished) {
    run.finished = true;
    run.code = state->code;
    run.result = result.readAll();
  } else if (waited < 0) {
    // SIGCHLD set to SIG_IGN by the program: the child was reaped by the
    // kernel and how it ended is not known.
    run.statusLost = std::string("waitpid: ") + std::strerror(waitErrno);
  } else if (WIFSIGNALED(status)) {
    run.signal = WTERMSIG(status);
  } else {
    run.exited = state->exited != 0;
    run.code = WIFEXITED(status) ? WEXITSTATUS(status) : status;
  }
  ::munmap(page, sizeof(ChildState));
  return run;
}
