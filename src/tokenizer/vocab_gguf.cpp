// tokenizer.ggml.* -> Vocab, with llama.cpp's defaults: special ids per model ("llama": bos 1,
// eos 2, unk 0; "gpt2": bos = eos = 11) replaced by the *_token_id keys when they are in range,
// add_bos/add_eos/add_space_prefix/clean_spaces/ignore_merges per model and pre-tokenizer
// replaced by the add_*_token keys, and the end-of-generation set found by token text.
#include <unordered_map>

#include "import/gguf/gguf.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab.h"

namespace dinoml::tokenizer {

namespace {
const gguf::Value::Array* array_of(const gguf::File& f, const std::string& key, gguf::ValueType elem) {
  const gguf::Value* v = f.find(key);
  if (!v) return nullptr;
  if (v->type != gguf::ValueType::array)
    throw TokenizerError(key + " must be an array, it is " + gguf::value_type_name(v->type));
  const auto& a = v->as_array();
  if (!a.empty() && v->elem_type != elem)
    throw TokenizerError(key + " must hold " + gguf::value_type_name(elem) + " values, it holds " +
                         gguf::value_type_name(v->elem_type));
  return &a;
}

std::optional<bool> bool_key(const gguf::File& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (!v) return std::nullopt;
  if (v->type != gguf::ValueType::boolean) throw TokenizerError(key + " must be a bool");
  return v->as_bool();
}

// Token texts that end generation (llama.cpp's list); they are made control tokens.
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};
// End-of-turn candidates, in llama.cpp's order of preference for `eot` (all are in kEogTexts).
const char* const kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                 "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                 "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                 "<end_of_utterance>"};
// Fill-in-the-middle markers: control tokens; pad/repo/file-separator ones also end generation.
const char* const kFimTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
    "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
    "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
const char* const kFimEogTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>",
                                    "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};
// gpt-oss: rendered even when special tokens are not (llama.cpp makes them user-defined).
const char* const kAlwaysRendered[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
}  // namespace

Vocab vocab_from_gguf(const gguf::File& f) {
  Vocab v;
  const gguf::Value* model = f.find("tokenizer.ggml.model");
  if (!model) throw TokenizerError("no tokenizer in this GGUF file (tokenizer.ggml.model is missing)");
  const std::string& m = model->as_str();
  if (m == "llama") {
    v.model = ModelType::spm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true, v.add_space_prefix = true;
  } else if (m == "gpt2") {
    v.model = ModelType::bpe;
    v.bos = 11, v.eos = 11;
  } else {
    throw TokenizerError("tokenizer.ggml.model '" + m +
                         "' is not supported (supported: llama = SentencePiece-style, gpt2 = byte-level BPE)");
  }
  const auto* tokens = array_of(f, "tokenizer.ggml.tokens", gguf::ValueType::string);
  if (!tokens || tokens->empty()) throw TokenizerError("tokenizer.ggml.tokens is missing or empty");
  const size_t n = tokens->size();
  v.tokens.reserve(n);
  for (const auto& t : *tokens) v.tokens.push_back(t.as_str());
  const gguf::Value* sv = f.find("tokenizer.ggml.scores");
  if (const auto* s = array_of(f, "tokenizer.ggml.scores",
                               sv && sv->elem_type == gguf::ValueType::int32 ? gguf::ValueType::int32 : gguf::ValueType::float32)) {
    if (s->size() != n) throw TokenizerError("tokenizer.ggml.scores has " + std::to_string(s->size()) + " values for " + std::to_string(n) + " tokens");
    for (const auto& x : *s) v.scores.push_back(static_cast<float>(x.as_f64()));
  }
  if (const auto* t = array_of(f, "tokenizer.ggml.token_type", gguf::ValueType::int32)) {
    if (t->size() != n) throw TokenizerError("tokenizer.ggml.token_type has " + std::to_string(t->size()) + " values for " + std::to_string(n) + " tokens");
    for (const auto& x : *t) v.types.push_back(static_cast<int32_t>(x.as_i64()));
  } else {
    v.types.assign(n, kTypeNormal);
  }
  if (v.model == ModelType::bpe) {
    const auto* merges = array_of(f, "tokenizer.ggml.merges", gguf::ValueType::string);
    if (!merges) throw TokenizerError("tokenizer.ggml.merges is missing (required for tokenizer.ggml.model gpt2)");
    for (const auto& x : *merges) v.merges.push_back(x.as_str());
    const gguf::Value* pre = f.find("tokenizer.ggml.pre");
    v.pre = pre ? pre->as_str() : "default";
    const PreTokenizerSpec spec = pre_tokenizer_spec(v.pre);
    v.ignore_merges = spec.ignore_merges;
    v.add_bos = spec.add_bos;
    v.clean_spaces = spec.clean_spaces;
  }
  if (auto b = bool_key(f, "tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
  if (auto b = bool_key(f, "tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = bool_key(f, "tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},       {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.unknown_token_id", &v.unk},   {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.padding_token_id", &v.pad},   {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
  };
  for (const auto& [key, id] : ids) {
    const gguf::Value* x = f.find(key);
    if (!x) continue;
    const uint64_t i = x->as_u64();
    if (i < n) *id = static_cast<int32_t>(i);  // out of range: llama.cpp keeps the default too
  }
  for (int32_t* id : {&v.bos, &v.eos, &v.unk})
    if (*id >= static_cast<int32_t>(n)) *id = kNoToken;
  // Control tokens by text, whatever the file says (llama.cpp's rules), and the end-of-generation set.
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t i = 0; i < n; ++i) id_of[v.tokens[i]] = static_cast<int32_t>(i);
  auto find = [&](const char* t) { auto it = id_of.find(t); return it == id_of.end() ? kNoToken : it->second; };
  auto make_control = [&](int32_t id) {
    if (id != kNoToken && v.types[id] != kTypeUnknown) v.types[id] = kTypeControl;
  };
  for (const char* t : kEotTexts)
    if (v.eot == kNoToken) v.eot = find(t);
  if (v.eom == kNoToken) v.eom = find("<|eom_id|>");
  for (int32_t id : {v.eot, v.eom}) make_control(id);
  for (const char* t : kFimTexts) make_control(find(t));
  for (const char* t : kFimEogTexts)
    if (int32_t id = find(t); id != kNoToken) {
      make_control(id);
      v.eog.insert(id);
    }
  for (const char* t : kEogTexts)
    if (int32_t id = find(t); id != kNoToken) {
      make_control(id);
      v.eog.insert(id);
    }
  for (const char* t : kAlwaysRendered)
    if (int32_t id = find(t); id != kNoToken) v.types[id] = kTypeUserDefined;
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id != kNoToken) v.eog.insert(id);
  // o200k_harmony: with <|return|> and <|call|> present, <|end|> ends a message, not generation.
  if (int32_t end = find("<|end|>"); end != kNoToken && find("<|return|>") != kNoToken && find("<|call|>") != kNoToken) {
    v.eog.erase(end);
    v.types[end] = kTypeUserDefined;
  }
  if (const gguf::Value* t = f.find("tokenizer.chat_template")) v.chat_template = t->as_str();
  return v;
}

}  // namespace dinoml::tokenizer
