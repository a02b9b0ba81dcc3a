# Fails if any source under ROOT includes an MLIR or LLVM header, or if a CMake
# file there looks for MLIR/LLVM: libloomrt must build where only CUDA exists.
# Usage: cmake -DROOT=<dir> [-DEXCLUDE=<dir>] -P CheckNoCompilerHeaders.cmake
if(NOT DEFINED ROOT OR NOT IS_DIRECTORY "${ROOT}")
  message(FATAL_ERROR "CheckNoCompilerHeaders: ROOT='${ROOT}' is not a directory")
endif()

file(GLOB_RECURSE sources LIST_DIRECTORIES false
  "${ROOT}/*.h" "${ROOT}/*.hh" "${ROOT}/*.hpp" "${ROOT}/*.hxx" "${ROOT}/*.inc"
  "${ROOT}/*.def" "${ROOT}/*.c" "${ROOT}/*.cc" "${ROOT}/*.cpp" "${ROOT}/*.cxx"
  "${ROOT}/*.cu" "${ROOT}/*.cuh")
file(GLOB_RECURSE cmake_files LIST_DIRECTORIES false
  "${ROOT}/CMakeLists.txt" "${ROOT}/*.cmake")
if(DEFINED EXCLUDE AND NOT EXCLUDE STREQUAL "")
  # A prefix test rather than a regex: paths may hold regex metacharacters.
  foreach(list_name sources cmake_files)
    set(kept "")
    foreach(file IN LISTS ${list_name})
      string(FIND "${file}" "${EXCLUDE}/" at)
      if(NOT at EQUAL 0)
        list(APPEND kept "${file}")
      endif()
    endforeach()
    set(${list_name} "${kept}")
  endforeach()
endif()
# This script names the patterns it looks for; it is not a violation.
list(FILTER cmake_files EXCLUDE REGEX "/CheckNoCompilerHeaders\\.cmake$")

set(violations "")
foreach(file IN LISTS sources)
  file(STRINGS "${file}" hits
    REGEX "^[ \t]*#[ \t]*(include|import)[ \t]*[<\"](mlir|llvm)(-c)?/")
  foreach(hit IN LISTS hits)
    string(APPEND violations "  ${file}: ${hit}\n")
  endforeach()
endforeach()
foreach(file IN LISTS cmake_files)
  file(STRINGS "${file}" hits
    REGEX "find_package[ \t]*\\([ \t]*(MLIR|LLVM|Clang)[ \t)]")
  foreach(hit IN LISTS hits)
    string(APPEND violations "  ${file}: ${hit}\n")
  endforeach()
endforeach()

list(LENGTH sources count)
if(violations)
  message(FATAL_ERROR
    "libloomrt must not depend on MLIR or LLVM; found:\n${violations}")
endif()
message(STATUS "checked ${count} sources under ${ROOT}: no MLIR/LLVM includes")
