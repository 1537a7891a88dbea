# Why: `longctx --version` must say which source a binary came from, so a bug
# report or a benchmark row names its commit. The description is taken when
# CMake configures, into a generated header of its own (base/version.h.in ->
# <build>/base/longctx_version.h) that only base/version.cc includes: a new
# description recompiles that one file. It is not re-taken on every commit
# (git's refs are not configure dependencies): that would relink every binary
# after each commit of a working tree. A build configured before later commits
# reports its configure-time commit (and "-dirty" is the tree's state then);
# CI and release builds configure from scratch.
# Outside a git checkout of this tree (a source tarball, or a tarball unpacked
# inside some other repository) the description is "unknown".
set(LONGCTX_GIT_DESCRIPTION "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --show-toplevel
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _lc_top
    RESULT_VARIABLE _lc_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_lc_rc EQUAL 0)
    file(REAL_PATH "${_lc_top}" _lc_top)
    file(REAL_PATH "${CMAKE_SOURCE_DIR}" _lc_src)
  endif()
  if(_lc_rc EQUAL 0 AND _lc_top STREQUAL _lc_src)
    execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _lc_desc
      RESULT_VARIABLE _lc_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_lc_rc EQUAL 0 AND NOT _lc_desc STREQUAL "")
      set(LONGCTX_GIT_DESCRIPTION "${_lc_desc}")
    endif()
  endif()
endif()
message(STATUS "longctx: version ${PROJECT_VERSION} (${LONGCTX_GIT_DESCRIPTION})")

# What else `longctx --version` reports about the build (0/1 for the header).
if(LONGCTX_WITH_CUDA)
  set(LONGCTX_VERSION_CUDA 1)
else()
  set(LONGCTX_VERSION_CUDA 0)
endif()
if(LONGCTX_NATIVE)
  set(LONGCTX_VERSION_NATIVE 1)
else()
  set(LONGCTX_VERSION_NATIVE 0)
endif()
configure_file(${CMAKE_SOURCE_DIR}/base/version.h.in ${CMAKE_BINARY_DIR}/base/longctx_version.h @ONLY)
