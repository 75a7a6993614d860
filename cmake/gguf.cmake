# GGUF import (issue 6): reader/writer in src/import/gguf, compiled into the compiler core.
# The block formats and reference (de)quantization are header-only (kernels/common/dinoml/
# quant_blocks.h, quant_ref.h). The ggml parity tests (tests/cpp/gguf) fetch their oracle with
# scripts/fetch-ggml-ref.
file(GLOB DINOML_GGUF_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/import/gguf/*.cpp)
target_sources(dinoml_compiler PRIVATE ${DINOML_GGUF_SRC})
