// Byte-level BPE pre-tokenization: the regexes llama.cpp applies per `tokenizer.ggml.pre` value
// and the way it applies them, so DinoML splits text into the same words.
//
// Each regex of a pre-tokenizer's list refines the previous split: it runs on every piece
// separately, and both its matches and the text between them become pieces. Regexes that use
// \p{N}/\p{L}/\p{P}/\p{M}/\p{S} run on a "collapsed" text where every non-ASCII code point is
// replaced by one stand-in unit for its class (whitespace -> \v), as llama.cpp does to run them
// with a non-Unicode regex engine; the others run on the code points with non-ASCII whitespace
// replaced by \v. The engine is PCRE2 (32-bit code units, so offsets are code points).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dinoml::tokenizer {

struct PreTokenizerSpec {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // llama.cpp's `ignore_merges`
  bool add_bos = false;        // default for add_bos (overridden by tokenizer.ggml.add_bos_token)
  bool clean_spaces = true;
};

// The spec for a `tokenizer.ggml.pre` value; TokenizerError listing the known ones otherwise.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);
std::vector<std::string> known_pre_tokenizers();

class RegexSplitter {
 public:
  explicit RegexSplitter(const std::vector<std::string>& regexes);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;
  // Lengths (in code points) of the consecutive pieces of `cpts`.
  std::vector<size_t> split(const std::vector<uint32_t>& cpts) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace dinoml::tokenizer
