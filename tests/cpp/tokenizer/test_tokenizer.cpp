// Unit checks of src/tokenizer and src/generate on small hand-made vocabularies; parity with
// llama.cpp on real vocabularies is tests/python/test_tokenizer.py.
#include <gtest/gtest.h>

#include "generate/chat_template.h"
#include "generate/sampler.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace dinoml;
using tokenizer::Tokenizer;
using tokenizer::Vocab;

namespace {
std::vector<std::string> split(const std::string& pre, const std::string& text) {
  tokenizer::RegexSplitter sp(tokenizer::pre_tokenizer_spec(pre).regexes);
  const auto cpts = tokenizer::utf8_to_cpts(text);
  std::vector<std::string> out;
  size_t s = 0;
  for (size_t len : sp.split(cpts)) {
    std::string w;
    for (size_t i = s; i < s + len; ++i) tokenizer::append_utf8(w, cpts[i]);
    out.push_back(w);
    s += len;
  }
  return out;
}

Vocab spm_vocab() {
  Vocab v;
  v.model = tokenizer::ModelType::spm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {tokenizer::kTypeUnknown, tokenizer::kTypeControl, tokenizer::kTypeControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.types.push_back(tokenizer::kTypeByte);
  }
  // Higher score merges first.
  for (const char* t : {"\xE2\x96\x81", "h", "e", "l", "o", "ll", "he", "llo", "hello", "\xE2\x96\x81hello"}) {
    v.tokens.push_back(t);
    v.types.push_back(tokenizer::kTypeNormal);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  for (size_t i = 259; i < v.tokens.size(); ++i) v.scores[i] = -static_cast<float>(i);
  v.bos = 1, v.eos = 2, v.unk = 0;
  v.add_bos = true, v.add_space_prefix = true;
  return v;
}
}  // namespace

TEST(PreTokenizer, Llama3AndGpt2Splits) {
  EXPECT_EQ(split("llama-bpe", "Hello world's 12345!!\n\n  x"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split("gpt-2", "I'm  fine"), (std::vector<std::string>{"I", "'m", " ", " fine"}));
  EXPECT_EQ(split("qwen2", "ab12"), (std::vector<std::string>{"ab", "1", "2"}));
  // Non-ASCII letters are letters, non-ASCII spaces are spaces.
  EXPECT_EQ(split("llama-bpe", "caf\xC3\xA9\xC2\xA0ok"), (std::vector<std::string>{"caf\xC3\xA9", "\xC2\xA0ok"}));
  EXPECT_THROW(tokenizer::pre_tokenizer_spec("nonexistent"), tokenizer::TokenizerError);
}

TEST(Unicode, ByteAlphabetRoundTrips) {
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokenizer::cpt_to_byte(tokenizer::byte_to_cpt(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(tokenizer::byte_to_cpt(' '), 0x120u);  // Ġ
  EXPECT_EQ(tokenizer::utf8_to_cpts("a\xFF" "b"), (std::vector<uint32_t>{'a', 0xFFFD, 'b'}));
}

TEST(Tokenizer, SentencePieceMergesByScoreWithByteFallback) {
  Tokenizer t(spm_vocab());
  const int32_t hello = t.token_id("\xE2\x96\x81hello");
  EXPECT_EQ(t.encode("hello"), (std::vector<int32_t>{1, hello}));
  // "ü" is no token: its two UTF-8 bytes.
  EXPECT_EQ(t.encode("\xC3\xBC", false), (std::vector<int32_t>{t.token_id("\xE2\x96\x81"), 3 + 0xC3, 3 + 0xBC}));
  EXPECT_EQ(t.decode(t.encode("hello \xC3\xBC", false)), "hello \xC3\xBC");  // the ▁ prefix is dropped again
  // llama.cpp keeps it when a leading BOS is removed (remove_special), and so does DinoML.
  EXPECT_EQ(t.decode(t.encode("hello"), true), " hello");
  // Control tokens in the text are text unless parse_special.
  EXPECT_EQ(t.encode("</s>", false, true), (std::vector<int32_t>{2}));
  EXPECT_NE(t.encode("</s>", false, false), (std::vector<int32_t>{2}));
  EXPECT_TRUE(t.token_to_piece(2).empty());
  EXPECT_EQ(t.token_to_piece(2, true), "</s>");
  EXPECT_THROW(t.token_to_piece(100000), tokenizer::TokenizerError);
}

TEST(Tokenizer, BytePairMergesByRank) {
  Vocab v;
  v.model = tokenizer::ModelType::bpe;
  v.pre = "gpt-2";
  v.tokens = {"h", "e", "l", "o", "\xC4\xA0", "he", "ll", "hell", "hello", "\xC4\xA0h", "<|end|>"};
  v.types.assign(v.tokens.size(), tokenizer::kTypeNormal);
  v.types.back() = tokenizer::kTypeControl;
  v.merges = {"l l", "h e", "he ll", "hell o", "\xC4\xA0 h"};
  v.eos = 10;
  v.eog = {10};
  Tokenizer t(v);
  EXPECT_EQ(t.encode("hello", false), (std::vector<int32_t>{8}));
  // " hello": l+l (rank 0), h+e, he+ll, hell+o; "Ġ hello" is no merge.
  EXPECT_EQ(t.encode("hello hello", false), (std::vector<int32_t>{8, 4, 8}));
  EXPECT_EQ(t.decode(t.encode("hello hello", false)), "hello hello");
  EXPECT_EQ(t.encode("hello<|end|>", false, true), (std::vector<int32_t>{8, 10}));
  EXPECT_TRUE(t.is_eog(10));
}

TEST(Sampler, GreedyTopKAndSeeds) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 0.5f, 1.0f};
  generate::SamplingParams p;
  p.temperature = 0;
  generate::Sampler g(p);
  EXPECT_EQ(g.sample(logits.data(), logits.size()), 1);
  p.temperature = 1, p.top_k = 2, p.top_p = 1, p.min_p = 0, p.seed = 3;
  generate::Sampler a(p), b(p);
  const auto d = a.distribution(logits.data(), logits.size());
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_EQ(d[1].id, 4);
  EXPECT_NEAR(d[0].p + d[1].p, 1.0, 1e-6);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits.data(), logits.size()), b.sample(logits.data(), logits.size()));
  p.top_p = 0;
  EXPECT_THROW(generate::Sampler{p}, std::invalid_argument);
}

TEST(ChatTemplate, DetectAndRender) {
  using generate::ChatFormat;
  EXPECT_EQ(generate::detect_chat_format("{{'<|im_start|>' + m['role']}}"), ChatFormat::chatml);
  EXPECT_EQ(generate::detect_chat_format("<|start_header_id|>"), ChatFormat::llama3);
  EXPECT_EQ(generate::detect_chat_format("<start_of_turn>"), ChatFormat::gemma);
  EXPECT_THROW(generate::detect_chat_format("[INST]"), generate::ChatTemplateError);
  EXPECT_EQ(generate::render_chat(ChatFormat::chatml, {{"user", "hi"}}, true, ""),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(generate::render_chat(ChatFormat::gemma, {{"system", "S"}, {"user", " hi "}}, true, "<bos>"),
            "<bos><start_of_turn>user\nS\n\nhi<end_of_turn>\n<start_of_turn>model\n");
}
