# Test script (ctest CpuIsaObjects.ShareNoInlineCode): an object of the per-ISA kernel folders built
# with flags above the library's baseline (kernels/cpu/avx512, kernels/cpu/avx512_lowp) must not
# define a weak symbol that another object of the library defines too. Such a symbol is an inline
# or template function (a std::string member, a header helper) that both objects emit; the linker
# keeps one copy for the whole library, and if it keeps the AVX-512 one, code that runs on every
# CPU stops with SIGILL on a CPU without AVX-512. Only code counts: weak data (a template's constant
# tables, DW.ref.* personality pointers) holds the same bytes whichever copy the linker keeps.
# Usage: cmake -DOBJ_DIR=<dinoml_cpu_kernels.dir> -DNM=<nm> -P check_isa_objects.cmake
file(GLOB_RECURSE all_objs "${OBJ_DIR}/*.o")
set(isa_objs "")
set(other_objs "")
foreach(obj IN LISTS all_objs)
  if(obj MATCHES "/kernels/cpu/avx512(_lowp)?/")
    list(APPEND isa_objs ${obj})
  else()
    list(APPEND other_objs ${obj})
  endif()
endforeach()
if(NOT isa_objs OR NOT other_objs)
  message(FATAL_ERROR "no objects under ${OBJ_DIR}: build dinoml_cpu_kernels first")
endif()

# Symbols defined by the baseline objects (any type).
execute_process(COMMAND ${NM} --defined-only ${other_objs} OUTPUT_VARIABLE base_out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on the baseline objects")
endif()
string(REGEX MATCHALL "[0-9a-f]+ [A-Za-z] [^\n]+" base_lines "${base_out}")
set(base_syms "")
foreach(line IN LISTS base_lines)
  string(REGEX REPLACE "^[0-9a-f]+ [A-Za-z] " "" sym "${line}")
  list(APPEND base_syms "${sym}")
endforeach()

set(bad "")
foreach(obj IN LISTS isa_objs)
  execute_process(COMMAND ${NM} --defined-only ${obj} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${obj}")
  endif()
  # W / w: weak code (V / v weak objects and u unique globals are data, e.g. a template's constant
  # tables: the same bytes whichever copy the linker keeps).
  string(REGEX MATCHALL "[0-9a-f]+ [Ww] [^\n]+" weak "${out}")
  foreach(line IN LISTS weak)
    string(REGEX REPLACE "^[0-9a-f]+ [A-Za-z] " "" sym "${line}")
    if(sym MATCHES "^DW\\.ref\\.")
      continue()
    endif()
    list(FIND base_syms "${sym}" at)
    if(NOT at EQUAL -1)
      get_filename_component(name ${obj} NAME)
      execute_process(COMMAND c++filt "${sym}" OUTPUT_VARIABLE pretty OUTPUT_STRIP_TRAILING_WHITESPACE)
      string(APPEND bad "  ${name}: ${pretty}\n")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "objects built for AVX-512 define weak symbols that baseline objects define too; move that "
                      "code to a baseline-ISA file (kernels/cpu/gemm_lowp.cpp shows how) or into an anonymous "
                      "namespace:\n${bad}")
endif()
list(LENGTH isa_objs n)
message(STATUS "${n} AVX-512 objects share no weak symbol with the baseline objects")
