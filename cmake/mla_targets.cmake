# Small helpers so each folder's CMakeLists stays a list of files.

# mla_static_link(target): executables built on the CPU machine run on the GPU machine.
function(mla_static_link target)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
endfunction()

# mla_cpu_test(name SOURCES...): a GoogleTest binary whose tests are ctest tests labelled `cpu`.
function(mla_cpu_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE mla_ref GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${MLA_WARNINGS})
  gtest_discover_tests(${name} PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
endfunction()

# mla_gpu_test(name SOURCES...): a GoogleTest binary labelled `gpu` (runs on the H200 only).
function(mla_gpu_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE mla_cuda mla_gpu_harness GTest::gtest)
  target_compile_options(${name} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${MLA_WARNINGS}> $<$<COMPILE_LANGUAGE:CUDA>:${MLA_CUDA_FLAGS}>)
  mla_static_link(${name})
  # Discovery would run the binary at build time, which needs a GPU: register the binary as one test.
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES LABELS gpu)
endfunction()
