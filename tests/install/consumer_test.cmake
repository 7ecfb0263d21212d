# Installs kiln into a scratch prefix, then configures, builds and runs examples/consumer
# against it, exactly as a project outside this tree would.
file(REMOVE_RECURSE ${SCRATCH})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${SCRATCH}/prefix)
run(${CMAKE_COMMAND} -S ${KILN_SOURCE_DIR}/examples/consumer -B ${SCRATCH}/build
    -DCMAKE_PREFIX_PATH=${SCRATCH}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${SCRATCH}/build)
run(${SCRATCH}/build/consumer)
message("${LAST_OUTPUT}")
if(NOT LAST_OUTPUT MATCHES "consumer: ok")
  message(FATAL_ERROR "the consumer ran but did not report success")
endif()
