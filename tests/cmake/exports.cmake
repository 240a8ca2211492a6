# The shared library's interface, checked from the outside:
#  - it exports exactly the functions the public headers mark PLM_API, all
#    named plm_* (nothing internal leaks, and nothing collides with another
#    library an app links beside it, such as ggml's gguf_*);
#  - stripped, it stays within a size budget, in optimized builds (CHECK_SIZE;
#    a sanitizer build is ~35 MiB): BUDGET_MIB, 2 by default, the budget of a
#    phone app (scripts/test-arm.sh checks the arm64 library against it).  An
#    x86-64 build carries its kernels three times (AVX2, AVX-VNNI, AVX-512,
#    chosen at run time) and is checked against 3 MiB.
# Run as: cmake -DLIB=... -DINCLUDE_DIR=... -DNM=... -DSTRIP=... -DOUT=... [-DBUDGET_MIB=N] -P exports.cmake
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REGEX MATCHALL "[TDRBW] [A-Za-z_][A-Za-z0-9_]*" exported "${syms}")
set(n_exported 0)
foreach(s ${exported})
  string(SUBSTRING "${s}" 2 -1 name)
  if(NOT name MATCHES "^plm_")
    message(FATAL_ERROR "libpocketlm exports '${name}', which is not part of the public API")
  endif()
  math(EXPR n_exported "${n_exported} + 1")
endforeach()

set(n_declared 0)
file(GLOB headers ${INCLUDE_DIR}/*.h)
foreach(h ${headers})
  file(STRINGS ${h} lines REGEX "^PLM_API ")
  list(LENGTH lines n)
  math(EXPR n_declared "${n_declared} + ${n}")
endforeach()
if(NOT n_exported EQUAL n_declared)
  message(FATAL_ERROR "libpocketlm exports ${n_exported} functions but the headers declare ${n_declared} with PLM_API "
                      "(a PLM_API function without a definition, or one defined static?)")
endif()

if(NOT CHECK_SIZE)
  message("exports: ${n_exported} public functions (size not checked in this build); 1 passed, 0 failed")
  return()
endif()
execute_process(COMMAND ${STRIP} -o ${OUT} ${LIB} RESULT_VARIABLE rc)
file(SIZE ${OUT} size)
if(NOT BUDGET_MIB)
  set(BUDGET_MIB 2)
endif()
math(EXPR budget "${BUDGET_MIB} * 1024 * 1024")
if(size GREATER budget)
  message(FATAL_ERROR "stripped libpocketlm is ${size} bytes, over the ${BUDGET_MIB} MiB budget")
endif()
message("exports: ${n_exported} public functions, stripped size ${size} bytes (budget ${budget}); 1 passed, 0 failed")
