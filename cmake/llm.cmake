# Text in, text out for LLMs (issue 39): the tokenizer read from GGUF files (src/tokenizer), the
# sampler and chat templates (src/generate). Runtime-side code: it needs the GGUF reader, PCRE2
# (pre-tokenizer regexes) and ICU (Unicode classes), never the compiler, so a server links it
# beside libdinoml_runtime.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2_32 REQUIRED IMPORTED_TARGET libpcre2-32)
find_package(ICU REQUIRED COMPONENTS uc)
file(GLOB DINOML_LLM_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/tokenizer/*.cpp ${CMAKE_SOURCE_DIR}/src/generate/*.cpp)
add_library(dinoml_llm STATIC ${DINOML_LLM_SRC})
target_include_directories(dinoml_llm PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(dinoml_llm PUBLIC dinoml_gguf PRIVATE PkgConfig::PCRE2_32 ICU::uc)
target_link_libraries(dinoml_cli_lib PUBLIC dinoml_llm)
if(TARGET dinoml_tokenizer_tests)
  target_link_libraries(dinoml_tokenizer_tests PRIVATE dinoml_llm)
endif()
if(DINOML_BUILD_PYTHON)
  # `_dinoml_llm`: Tokenizer, Sampler, chat templates for Python (dinoml.llm); no compiler inside.
  file(GLOB DINOML_PY_LLM_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/src/llm/*.cpp)
  pybind11_add_module(_dinoml_llm ${DINOML_PY_LLM_SRC})
  target_link_libraries(_dinoml_llm PRIVATE dinoml_llm)
  set_target_properties(_dinoml_llm PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_SOURCE_DIR}/python/dinoml)
endif()
