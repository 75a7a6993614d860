// Text <-> token ids for the vocabularies of GGUF files, with llama.cpp's algorithms and rules so
// ids equal `llama_tokenize` and text equals `llama_detokenize`:
// * SentencePiece-style ("llama"): spaces become ▁ (plus a leading one when add_space_prefix),
//   adjacent pieces merge highest score first (ties: leftmost), pieces that are no token fall
//   back to `<0xNN>` byte tokens;
// * byte-level BPE ("gpt2"): the pre-tokenizer regexes of `tokenizer.ggml.pre` split the text into
//   words, each word's bytes are spelled in GPT-2's byte alphabet and merged lowest merge rank
//   first (ties: leftmost).
// Special tokens (control, user-defined, unknown) are cut out of the text first, longest first;
// control/unknown ones only when parse_special is on (user-defined always).
// Thread-safe for concurrent encode/decode calls (no mutable state).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace dinoml::tokenizer {

class RegexSplitter;

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  // Reads the vocabulary of a GGUF file (vocab-only files work too).
  static Tokenizer from_gguf(const std::string& path);

  // add_special: BOS/EOS as the vocabulary's add_bos/add_eos say; parse_special: control tokens
  // written in the text (e.g. "<|im_start|>") become their ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = false) const;
  // The text of one token; control/unknown tokens give "" unless `special`.
  std::string token_to_piece(int32_t id, bool special = false) const;
  // remove_special: drop a leading BOS / trailing EOS that the vocabulary adds; unparse_special:
  // render control tokens as their text.
  std::string decode(const std::vector<int32_t>& ids, bool remove_special = false, bool unparse_special = false) const;

  const Vocab& vocab() const { return v_; }
  size_t n_tokens() const { return v_.tokens.size(); }
  bool is_eog(int32_t id) const { return v_.eog.count(id) != 0; }
  int32_t token_id(const std::string& text) const;  // kNoToken when absent

 private:
  Vocab v_;
  std::unordered_map<std::string, int32_t> to_id_;
  std::unordered_map<std::string, int32_t> bpe_ranks_;  // "left\0right" -> merge rank
  std::vector<int32_t> special_;  // partition order: longest text first
  std::unique_ptr<RegexSplitter> splitter_;

  struct Fragment {
    int32_t token;       // kNoToken for text
    size_t offset, len;  // text fragments: a range of the input
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void encode_spm(const std::string& text, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  int32_t byte_token(uint8_t b) const;
  int bpe_rank(const std::string& left, const std::string& right) const;
};

}  // namespace dinoml::tokenizer
