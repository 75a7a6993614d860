# Kernel selection (src/tune/): the profile cache is SQLite (Debian libsqlite3-dev, in scripts/deps.sh).
find_package(SQLite3 REQUIRED)
target_link_libraries(dinoml_compiler PUBLIC SQLite::SQLite3 ${CMAKE_DL_LIBS})
