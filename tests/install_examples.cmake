# CTest hymba_install_examples (label "install"): installs the build to a
# temporary prefix, configures and builds examples/ out of tree against it
# with find_package(hymba), then runs the generate example on a tiny model
# and compares its text with the installed `hymba generate`.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=...
#         [-DLAUNCHER=ccache] [-DSANITIZE=ON] -P install_examples.cmake
cmake_minimum_required(VERSION 3.25)

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run)  # runs a command, fails the test with its output when it fails
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
  set(run_error "${err}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f bin/hymba include/hymba/api/hymba.h include/hymba/core/error.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()
file(GLOB_RECURSE config ${prefix}/*/hymbaConfig.cmake)
file(GLOB_RECURSE version ${prefix}/*/hymbaConfigVersion.cmake)
file(GLOB_RECURSE cli_headers ${prefix}/include/hymba/cli/*)
if(NOT config OR NOT version OR cli_headers)
  message(FATAL_ERROR "package config missing (${config} ${version}) or CLI headers installed (${cli_headers})")
endif()

set(configure_args -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
                   -DCMAKE_PREFIX_PATH=${prefix})
if(LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(SANITIZE)  # the installed library is instrumented: so must the programs linking it be
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
run(${CMAKE_COMMAND} ${configure_args})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)

# A tiny model (random weights) with the byte tokenizer.
set(model ${WORK_DIR}/model)
run(${prefix}/bin/hymba init --preset hybrid-official --scale tiny --vocab-size 259 --seed 3 --out ${model})
run(${prefix}/bin/hymba tokenizer train --type byte --out ${model}/tokenizer.model)
set(example ${WORK_DIR}/build/hymba_example_generate)
run(${example} --help)
if(NOT run_output MATCHES "^usage: hymba_example_generate DIR PROMPT")
  message(FATAL_ERROR "--help printed: ${run_output}")
endif()
run(${example} ${model} Hello --max-new-tokens 12 --seed 4 --threads 2)
set(library_text "${run_output}")
run(${prefix}/bin/hymba --threads 2 generate --ckpt ${model} --prompt Hello --max-new-tokens 12 --seed 4)
if(NOT library_text STREQUAL run_output OR NOT library_text MATCHES "^Hello")
  message(FATAL_ERROR "the example printed '${library_text}' but hymba generate '${run_output}'")
endif()
execute_process(COMMAND ${example} ${WORK_DIR}/no-such-dir hi RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "^[^\n]*no such checkpoint[^\n]*\n$")
  message(FATAL_ERROR "a missing directory gave exit ${rc} and: ${err}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "installed, built the examples with find_package(hymba) and ran one")
