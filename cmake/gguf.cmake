# GGUF import (issue 6): reader/writer in src/import/gguf, compiled into the compiler core.
# The block formats and reference (de)quantization are header-only (kernels/common/dinoml/
# quant_blocks.h, quant_ref.h). The ggml parity tests (tests/cpp/gguf) fetch their oracle with
# scripts/fetch-ggml-ref.
# The file reader/writer is its own library: the tokenizer and generation (cmake/llm.cmake) read
# GGUF files without the compiler; binding tensors to graph constants stays in the compiler.
add_library(dinoml_gguf STATIC ${CMAKE_SOURCE_DIR}/src/import/gguf/gguf_reader.cpp
  ${CMAKE_SOURCE_DIR}/src/import/gguf/gguf_value.cpp ${CMAKE_SOURCE_DIR}/src/import/gguf/gguf_writer.cpp)
target_include_directories(dinoml_gguf PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/kernels/common)
target_link_libraries(dinoml_gguf PUBLIC fmt::fmt)
target_sources(dinoml_compiler PRIVATE ${CMAKE_SOURCE_DIR}/src/import/gguf/gguf_constant.cpp)
target_link_libraries(dinoml_compiler PUBLIC dinoml_gguf)

# bench/ops/qgemm_bench: quantized GEMM paths vs the fp32 GEMM on the dequantized weights.
add_executable(qgemm_bench ${CMAKE_SOURCE_DIR}/bench/ops/qgemm_bench.cpp)
target_include_directories(qgemm_bench PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cpu ${CMAKE_SOURCE_DIR}/kernels/common)
target_link_libraries(qgemm_bench PRIVATE dinoml_cpu_kernels OpenMP::OpenMP_CXX)
target_compile_options(qgemm_bench PRIVATE -O2)

# The runtime's artifact verifier checks quantized constant slots against the block table.
target_include_directories(dinoml_runtime PRIVATE ${CMAKE_SOURCE_DIR}/kernels/common)
