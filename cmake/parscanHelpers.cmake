# cmake/parscanHelpers.cmake — small helpers shared by the parscan build (included from the
# top-level CMakeLists.txt, so they are visible in test/, benchmarks/ and docs/examples/).
include_guard(GLOBAL)

# parscan_cccl_hints(<out-var>)
# Directories where the CUDA toolkit keeps CCCL's CMake package (cccl/cccl-config.cmake).
function(parscan_cccl_hints out)
  set(hints "")
  if(CUDAToolkit_FOUND)
    if(CUDAToolkit_LIBRARY_DIR)
      list(APPEND hints "${CUDAToolkit_LIBRARY_DIR}/cmake")
    endif()
    if(CUDAToolkit_TARGET_DIR)
      list(APPEND hints "${CUDAToolkit_TARGET_DIR}/lib/cmake" "${CUDAToolkit_TARGET_DIR}/lib64/cmake")
    endif()
    if(CUDAToolkit_LIBRARY_ROOT)
      list(APPEND hints "${CUDAToolkit_LIBRARY_ROOT}/lib64/cmake" "${CUDAToolkit_LIBRARY_ROOT}/lib/cmake")
    endif()
  endif()
  foreach(var IN ITEMS CUDAToolkit_ROOT CUDA_PATH CUDA_HOME)
    if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "")
      list(APPEND hints "$ENV{${var}}/lib64/cmake" "$ENV{${var}}/lib/cmake")
    endif()
  endforeach()
  list(APPEND hints
    /usr/local/cuda/lib64/cmake
    /usr/local/cuda/lib/cmake
    /usr/local/cuda/targets/x86_64-linux/lib/cmake
    /usr/local/cuda/targets/sbsa-linux/lib/cmake)
  list(REMOVE_DUPLICATES hints)
  set(${out} "${hints}" PARENT_SCOPE)
endfunction()

# parscan_find_cccl()
# Finds the CCCL headers (libcu++ and CUB) the public headers include, also in a host-only
# build. Prefers CCCL's own CMake package (target CCCL::CCCL); falls back to the include
# directory in the cache variable PARSCAN_CCCL_INCLUDE_DIR. Sets, in the caller's scope:
#   PARSCAN_CCCL_MODE  "package" or "include"
#   PARSCAN_CCCL_DIR   the directory of cccl-config.cmake (package mode)
macro(parscan_find_cccl)
  set(PARSCAN_CCCL_INCLUDE_DIR "/usr/local/cuda/include/cccl" CACHE PATH
      "Fallback CCCL include directory (holds cuda/std/ and cub/), used when find_package(CCCL) fails")
  option(PARSCAN_USE_CCCL_PACKAGE "Look for CCCL's CMake package before using PARSCAN_CCCL_INCLUDE_DIR" ON)
  set(PARSCAN_CCCL_MODE "")
  set(PARSCAN_CCCL_DIR "")
  if(PARSCAN_USE_CCCL_PACKAGE)
    parscan_cccl_hints(_parscan_cccl_hints)
    find_package(CCCL CONFIG QUIET COMPONENTS libcudacxx CUB HINTS ${_parscan_cccl_hints})
    if(CCCL_FOUND AND TARGET CCCL::CCCL)
      set(PARSCAN_CCCL_MODE "package")
      set(PARSCAN_CCCL_DIR "${CCCL_DIR}")
      message(STATUS "parscan: CCCL ${CCCL_VERSION} from ${CCCL_DIR}")
    endif()
    unset(_parscan_cccl_hints)
  endif()
  if(NOT PARSCAN_CCCL_MODE)
    if(EXISTS "${PARSCAN_CCCL_INCLUDE_DIR}/cuda/std/complex")
      set(PARSCAN_CCCL_MODE "include")
      message(STATUS "parscan: CCCL headers from ${PARSCAN_CCCL_INCLUDE_DIR}")
    else()
      message(FATAL_ERROR
        "parscan: CCCL headers not found. Install the CUDA toolkit (or CCCL), then pass "
        "-DCMAKE_PREFIX_PATH=<toolkit>/lib64/cmake, -DCCCL_DIR=<dir of cccl-config.cmake>, or "
        "-DPARSCAN_CCCL_INCLUDE_DIR=<dir holding cuda/std/complex>.")
    endif()
  endif()
endmacro()

# parscan_link_cccl(<target>)
# Makes the CCCL headers a PUBLIC usage requirement of <target>.
function(parscan_link_cccl target)
  if(PARSCAN_CCCL_MODE STREQUAL "package")
    target_link_libraries(${target} PUBLIC CCCL::CCCL)
  else()
    target_include_directories(${target} SYSTEM PUBLIC "${PARSCAN_CCCL_INCLUDE_DIR}")
  endif()
endfunction()

# parscan_target_warnings(<target>)
# -Wall -Wextra (or /W4) on the target's own C++ sources; not propagated to consumers.
function(parscan_target_warnings target)
  target_compile_options(${target} PRIVATE
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU,Clang,AppleClang>>:-Wall;-Wextra>"
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:MSVC>>:/W4>")
endfunction()
