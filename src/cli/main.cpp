#include "cli/cli.h"

int main(int argc, char** argv) { return dinoml::cli::main(argc, argv); }
