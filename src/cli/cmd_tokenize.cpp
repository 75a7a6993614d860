// `dinoml tokenize FILE --text "..."`: the ids (and pieces) of a text under a GGUF file's
// tokenizer, or the text of ids with --decode.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "tokenizer/tokenizer.h"

namespace dinoml::cli {

int cmd_tokenize(const TokenizeFlags& a) {
  const auto tok = tokenizer::Tokenizer::from_gguf(a.path);
  if (!a.decode.empty()) {
    std::vector<int32_t> ids;
    std::stringstream ss(a.decode);
    for (std::string item; std::getline(ss, item, ',');) {
      if (item.find_first_not_of(" ") == std::string::npos) continue;
      try {
        ids.push_back(std::stoi(item));
      } catch (const std::exception&) {
        throw std::runtime_error("--decode expects comma-separated token ids, got '" + item + "'");
      }
    }
    std::cout << tok.decode(ids, !a.no_special, a.parse_special) << (a.ids_only ? "" : "\n");
    return 0;
  }
  std::string text = a.text;
  if (!a.text_file.empty()) {
    std::ifstream f(a.text_file, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read --file '" + a.text_file + "'");
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  const auto ids = tok.encode(text, !a.no_special, a.parse_special);
  if (a.as_json) {
    nlohmann::json j;
    j["ids"] = ids;
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tok.vocab().tokens[id]);
    j["tokens"] = pieces;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  if (a.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
    std::cout << "\n";
    return 0;
  }
  for (int32_t id : ids) {
    std::cout << id << "\t'" << tok.token_to_piece(id, true) << "'\n";
  }
  std::cout << ids.size() << " tokens (" << (tok.vocab().model == tokenizer::ModelType::spm ? "llama" : "gpt2 / " + tok.vocab().pre)
            << ", " << tok.n_tokens() << " in the vocabulary)\n";
  return 0;
}

}  // namespace dinoml::cli
