# Trust (issue 8): the loader-hardening tests compile a real artifact with this build's `dinoml`
# CLI, so the runtime test binary must be built after it.
if(TARGET dinoml_runtime_tests AND TARGET dinoml)
  add_dependencies(dinoml_runtime_tests dinoml)
endif()
