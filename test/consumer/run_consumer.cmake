# test/consumer/run_consumer.cmake — configure, build and run test/consumer as a user would.
#
#   cmake -DMODE=install|subdir -DPARSCAN_SOURCE_DIR=<src> [-DPARSCAN_BINARY_DIR=<build>]
#         -DWORK_DIR=<scratch> [-DCONFIG=Release] [-DGENERATOR=Ninja] [-DCXX_COMPILER=g++]
#         [-DCCCL_DIR=...] [-DCCCL_INCLUDE_DIR=...] -P run_consumer.cmake
#
# install: `cmake --install PARSCAN_BINARY_DIR --prefix WORK_DIR/prefix`, then the consumer
#          finds the package there with find_package(parscan CONFIG).
# subdir:  the consumer add_subdirectory()s PARSCAN_SOURCE_DIR, host-only (PARSCAN_ENABLE_CUDA=OFF).
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS MODE PARSCAN_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(run_step what)
  message(STATUS "consumer (${MODE}): ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}): ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(configure_args
  -S "${PARSCAN_SOURCE_DIR}/test/consumer"
  -B "${WORK_DIR}/build"
  "-DCMAKE_BUILD_TYPE=${CONFIG}")
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CCCL_DIR)
  list(APPEND configure_args "-DCCCL_DIR=${CCCL_DIR}")
endif()

if(MODE STREQUAL "install")
  if(NOT PARSCAN_BINARY_DIR)
    message(FATAL_ERROR "run_consumer.cmake: MODE=install needs -DPARSCAN_BINARY_DIR=<parscan build>")
  endif()
  run_step("install to ${WORK_DIR}/prefix"
    "${CMAKE_COMMAND}" --install "${PARSCAN_BINARY_DIR}" --prefix "${WORK_DIR}/prefix" --config "${CONFIG}")
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
elseif(MODE STREQUAL "subdir")
  list(APPEND configure_args
    -DPARSCAN_CONSUMER_USE_SUBDIR=ON
    "-DPARSCAN_SOURCE_DIR=${PARSCAN_SOURCE_DIR}"
    -DPARSCAN_ENABLE_CUDA=OFF)
  if(CCCL_INCLUDE_DIR)
    list(APPEND configure_args "-DPARSCAN_CCCL_INCLUDE_DIR=${CCCL_INCLUDE_DIR}")
  endif()
else()
  message(FATAL_ERROR "run_consumer.cmake: MODE must be install or subdir, not '${MODE}'")
endif()

run_step("configure" "${CMAKE_COMMAND}" ${configure_args})
run_step("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --config "${CONFIG}")

find_program(consumer_exe parscan_consumer
  PATHS "${WORK_DIR}/build" "${WORK_DIR}/build/${CONFIG}" NO_DEFAULT_PATH NO_CACHE)
if(NOT consumer_exe)
  message(FATAL_ERROR "consumer (${MODE}): parscan_consumer was not built")
endif()
run_step("run" "${consumer_exe}")
message(STATUS "consumer (${MODE}): passed")
