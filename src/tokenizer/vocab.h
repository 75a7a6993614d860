// A tokenizer vocabulary as GGUF files carry it (`tokenizer.ggml.*`), after llama.cpp's loading
// rules: default special ids per model, add-BOS/EOS defaults per pre-tokenizer, and the
// end-of-generation set found by token text. Plain data: the runtime side (generation, serving)
// builds it from a GGUF file without the compiler.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace dinoml::gguf {
class File;
}

namespace dinoml::tokenizer {

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `tokenizer.ggml.token_type` values (gguf-py's TokenType).
enum TokenType : int32_t {
  kTypeUndefined = 0,
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

// `tokenizer.ggml.model`: "llama" (SentencePiece-style: score-ordered merges, byte fallback
// `<0xNN>`, ▁ for spaces) or "gpt2" (byte-level BPE: merges by rank over GPT-2's byte alphabet).
enum class ModelType { spm, bpe };

constexpr int32_t kNoToken = -1;

struct Vocab {
  ModelType model = ModelType::spm;
  std::string pre = "default";             // tokenizer.ggml.pre (BPE pre-tokenizer)
  std::vector<std::string> tokens;
  std::vector<float> scores;               // empty: all 0
  std::vector<int32_t> types;              // TokenType per token
  std::vector<std::string> merges;         // BPE: "left right", rank = index
  int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken, sep = kNoToken, pad = kNoToken;
  int32_t eot = kNoToken, eom = kNoToken;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool ignore_merges = false;  // BPE: a pre-tokenized word that is a token is kept whole
  bool clean_spaces = false;   // decode: " ." -> "." and English contractions (llama.cpp's rule)
  std::set<int32_t> eog;       // end-of-generation tokens
  std::string chat_template;   // tokenizer.chat_template ("" when absent)
};

// Reads `tokenizer.ggml.*` from a parsed GGUF file; TokenizerError names the missing/bad key.
Vocab vocab_from_gguf(const gguf::File& f);

}  // namespace dinoml::tokenizer
