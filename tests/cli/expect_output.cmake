# ctest helper: runs CMD (a ;-list) and checks it exits 0 with stdout equal to the file EXPECTED, byte for byte.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
file(READ "${EXPECTED}" want)
if(NOT "${rc}" STREQUAL "0")
  message(FATAL_ERROR "exit code ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}" STREQUAL "${want}")
  message(FATAL_ERROR "stdout differs from ${EXPECTED}\ngot:\n${out}\nwant:\n${want}")
endif()
