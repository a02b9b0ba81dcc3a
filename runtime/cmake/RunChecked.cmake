# Runs a test's command and checks how it ended, for the tests CTest judges by
# their output: with PASS_REGULAR_EXPRESSION set, CTest ignores the exit
# status, so a command (mpirun and its ranks) that prints the expected summary
# and then crashes or exits non-zero would pass. This script passes the
# command's output through and, when the command ended otherwise than
# expected, prints an error holding "loomrt-test: FAILED" and exits non-zero; the tests
# set FAIL_REGULAR_EXPRESSION to that prefix (loomrt_add_checked_test in
# runtime/tests/CMakeLists.txt).
#
# Usage: cmake [-DEXPECT=success|failure] -P RunChecked.cmake -- CMD ARGS...
#   success (default): the command must exit 0.
#   failure: the command must exit with a non-zero status (a clean refusal);
#            dying on a signal (a crash) is reported as a failure too.
# An argument that contains ';' reaches the command split at it (CMake lists).
if(NOT DEFINED EXPECT)
  set(EXPECT success)
endif()
if(NOT EXPECT MATCHES "^(success|failure)$")
  message(FATAL_ERROR "loomrt-test: FAILED: EXPECT must be success or "
                      "failure, got '${EXPECT}'")
endif()

set(command "")
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 0 ${last})
  if(after_dashes)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "loomrt-test: FAILED: no command after --")
endif()
list(GET command 0 program)

# The output goes straight to this process's, which CTest reads.
execute_process(COMMAND ${command} RESULT_VARIABLE status)

if(EXPECT STREQUAL "success" AND NOT status STREQUAL "0")
  message(FATAL_ERROR "loomrt-test: FAILED: ${program} exited with status "
                      "'${status}' (expected 0)")
elseif(EXPECT STREQUAL "failure" AND status STREQUAL "0")
  message(FATAL_ERROR "loomrt-test: FAILED: ${program} exited with status 0 "
                      "(expected a refusal: a non-zero status)")
elseif(EXPECT STREQUAL "failure" AND NOT status MATCHES "^[0-9]+$")
  message(FATAL_ERROR "loomrt-test: FAILED: ${program} died ('${status}') "
                      "instead of refusing with a non-zero status")
endif()
