// UTF-8 handling and the Unicode facts the pre-tokenizers need (ICU's character database),
// with llama.cpp's conventions: an invalid byte decodes to U+FFFD and is skipped, the length of
// a sequence is read from its lead byte alone.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dinoml::tokenizer {

// Bytes of the UTF-8 sequence starting with `lead` (1 for continuation bytes).
size_t utf8_len(char lead);
std::vector<uint32_t> utf8_to_cpts(std::string_view s);
void append_utf8(std::string& out, uint32_t cpt);

// General category groups as llama.cpp's pre-tokenizer regexes use them (\p{N}, \p{L}, \p{P},
// \p{M}, \p{S}); `other` for the rest.
enum class CharClass : uint8_t { other, number, letter, punctuation, mark, symbol };
CharClass char_class(uint32_t cpt);
bool is_whitespace(uint32_t cpt);  // Unicode White_Space

// GPT-2's byte-level alphabet: every byte maps to one printable code point.
uint32_t byte_to_cpt(uint8_t b);
// The byte of a code point of that alphabet, or -1.
int cpt_to_byte(uint32_t cpt);

}  // namespace dinoml::tokenizer
