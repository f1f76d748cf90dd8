# Runs test_simulator under Oclgrind twice and fails on any report (docs/robustness.md):
#   1. --data-races --check-api: every point of every algorithm, on an aligned and a ragged
#      tiny problem;
#   2. --uninitialized with programs built at -cl-opt-disable (so that no value is optimised
#      away before it is read): every algorithm at its smallest legal point, on both problems
#      (unoptimised programs run several times slower).
# The device gets 96 KiB of local memory: Oclgrind counts the __local arrays of every kernel
# of a program against each launch (gemm_nt and gemm_nt_accum declare theirs twice), so an
# entry that fits NVIDIA's 48 KiB per kernel needs twice that here.
#   cmake -DOCLGRIND=... -DTEST_BINARY=... -DWORK_DIR=... -P simulator.cmake
cmake_minimum_required(VERSION 3.16)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(failed FALSE)
foreach(pass races uninitialized)
  set(log "${WORK_DIR}/${pass}.log")
  set(flags --log "${log}" --local-mem-size 262144)
  if(pass STREQUAL "races")
    list(APPEND flags --data-races --check-api)
    unset(ENV{OCLTK_SIMULATOR_POINTS})
  else()
    list(APPEND flags --uninitialized --check-api --build-options -cl-opt-disable)
    set(ENV{OCLTK_SIMULATOR_POINTS} smallest)
  endif()
  string(TIMESTAMP start "%s")
  execute_process(COMMAND "${OCLGRIND}" ${flags} "${TEST_BINARY}" --gtest_color=no
                  WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  set(report "")
  if(EXISTS "${log}")
    file(READ "${log}" report)
  endif()
  string(REGEX MATCHALL "\\[ RUNS     \\][^\n]*" runs "${out}")
  list(LENGTH runs algorithms)
  set(summary "simulator pass '${pass}': ${algorithms} algorithms, ${seconds} s, exit status ${status}\n")
  foreach(line IN LISTS runs)
    string(APPEND summary "  ${line}\n")
  endforeach()
  message("${summary}")
  file(APPEND "${WORK_DIR}/summary.txt" "${summary}")  # read after a run that passed
  if(NOT status EQUAL 0)
    message("${out}")
    set(failed TRUE)
  endif()
  # Oclgrind's own messages only go to the log: anything there is a report.
  string(STRIP "${report}" report)
  if(NOT report STREQUAL "")
    string(LENGTH "${report}" size)
    if(size GREATER 20000)
      string(SUBSTRING "${report}" 0 20000 report)
      set(report "${report}\n... (${log} holds the rest)")
    endif()
    message("Oclgrind reported, pass '${pass}':\n${report}")
    set(failed TRUE)
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "the simulator found faults (above)")
endif()
