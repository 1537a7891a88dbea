# Why: `longctx --version` must say which source a binary came from, so a bug
# report or a benchmark row names its commit. The description is taken when
# CMake configures, into a generated header of its own (base/version.h.in ->
# <build>/base/longctx_version.h) that only base/version.cc includes: a new
# description recompiles that one file. A commit or a checkout moves git's HEAD
# or the branch's ref, which are configure dependencies, so the next build
# re-configures and picks the new commit up; editing a file after configuring
# does not (the "-dirty" mark is the tree's state at configure time).
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
    # Re-configure when HEAD moves: HEAD itself (a checkout), the branch it
    # names (a commit) and packed-refs (where a packed branch lives).
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path HEAD --git-path packed-refs
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _lc_paths
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND ${GIT_EXECUTABLE} symbolic-ref -q HEAD
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _lc_ref
      RESULT_VARIABLE _lc_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_lc_rc EQUAL 0)
      execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path ${_lc_ref}
        WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _lc_refpath
        OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      string(APPEND _lc_paths "\n${_lc_refpath}")
    endif()
    string(REPLACE "\n" ";" _lc_paths "${_lc_paths}")
    foreach(_lc_p IN LISTS _lc_paths)
      if(NOT IS_ABSOLUTE "${_lc_p}")
        set(_lc_p "${CMAKE_SOURCE_DIR}/${_lc_p}")
      endif()
      if(EXISTS "${_lc_p}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_lc_p}")
      endif()
    endforeach()
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
