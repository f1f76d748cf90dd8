# Runs one fuzz target for SECONDS from its seed corpora (SEEDS, '|'-separated) into a fresh
# work corpus, and prints how many inputs it ran; a crash, a sanitizer report, a leak, an
# input over 10 s or 2 GiB fails (libFuzzer then saves it as WORK_DIR/crash-*).
#   cmake -DFUZZER=... -DSEEDS=a|b -DDICT=... -DSECONDS=25 -DWORK_DIR=... -P run.cmake
cmake_minimum_required(VERSION 3.16)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/corpus")
string(REPLACE "|" ";" seeds "${SEEDS}")
set(dict_flag "")
get_filename_component(target "${FUZZER}" NAME)
if(NOT target STREQUAL "fuzz_npy" AND NOT target STREQUAL "fuzz_cli_args")
  set(dict_flag "-dict=${DICT}")
endif()
# -max_len: the largest seeds (a fleet's database, the H200 profile) are cut to 8 KiB, which
# keeps several entries and sections and runs several times more inputs.
execute_process(COMMAND "${FUZZER}" -max_total_time=${SECONDS} -max_len=8192 -timeout=10 -rss_limit_mb=2048
                        -print_final_stats=1
                        -artifact_prefix=${WORK_DIR}/ ${dict_flag} "${WORK_DIR}/corpus" ${seeds}
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(REGEX MATCH "stat::number_of_executed_units: *([0-9]+)" units "${out}")
set(summary "${target}: ${CMAKE_MATCH_1} inputs in ${SECONDS} s, exit status ${status}")
message("${summary}")
file(WRITE "${WORK_DIR}/summary.txt" "${summary}\n")  # read after a run that passed
if(NOT status EQUAL 0)
  string(LENGTH "${out}" size)
  if(size GREATER 30000)
    math(EXPR from "${size} - 30000")
    string(SUBSTRING "${out}" ${from} 30000 out)
  endif()
  message(FATAL_ERROR "${out}")
endif()
