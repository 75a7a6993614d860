#include "tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <array>

namespace dinoml::tokenizer {

size_t utf8_len(char lead) {
  static constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

namespace {
// One code point at `off`; false (and off unchanged) when the sequence is invalid. Accepts what
// llama.cpp's decoder accepts (no overlong or surrogate checks) so both split text the same way.
bool decode_one(std::string_view s, size_t& off, uint32_t& cpt) {
  auto b = [&](size_t i) { return static_cast<uint8_t>(s[off + i]); };
  auto cont = [&](size_t i) { return off + i < s.size() && (b(i) & 0xC0) == 0x80; };
  const uint8_t c = b(0);
  if (!(c & 0x80)) { cpt = c; off += 1; return true; }
  if (!(c & 0x40)) return false;
  if (!(c & 0x20)) {
    if (!cont(1)) return false;
    cpt = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu); off += 2; return true;
  }
  if (!(c & 0x10)) {
    if (!cont(1) || !cont(2)) return false;
    cpt = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu); off += 3; return true;
  }
  if (!(c & 0x08)) {
    if (!cont(1) || !cont(2) || !cont(3)) return false;
    cpt = ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu); off += 4; return true;
  }
  return false;
}
}  // namespace

std::vector<uint32_t> utf8_to_cpts(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t off = 0;
  while (off < s.size()) {
    uint32_t c = 0;
    if (decode_one(s, off, c)) {
      out.push_back(c);
    } else {
      out.push_back(0xFFFD);
      ++off;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

CharClass char_class(uint32_t cpt) {
  switch (u_charType(static_cast<UChar32>(cpt))) {
    case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER: case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::letter;
    case U_NON_SPACING_MARK: case U_ENCLOSING_MARK: case U_COMBINING_SPACING_MARK:
      return CharClass::mark;
    case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER:
      return CharClass::number;
    case U_DASH_PUNCTUATION: case U_START_PUNCTUATION: case U_END_PUNCTUATION: case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION: case U_INITIAL_PUNCTUATION: case U_FINAL_PUNCTUATION:
      return CharClass::punctuation;
    case U_MATH_SYMBOL: case U_CURRENCY_SYMBOL: case U_MODIFIER_SYMBOL: case U_OTHER_SYMBOL:
      return CharClass::symbol;
    default:
      return CharClass::other;
  }
}

bool is_whitespace(uint32_t cpt) { return u_isUWhiteSpace(static_cast<UChar32>(cpt)); }

namespace {
struct ByteAlphabet {
  std::array<uint32_t, 256> to_cpt{};
  ByteAlphabet() {
    // Printable Latin-1 bytes stand for themselves; the others take 256, 257, ... in byte order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cpt[b] = printable ? static_cast<uint32_t>(b) : next++;
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}
}  // namespace

uint32_t byte_to_cpt(uint8_t b) { return alphabet().to_cpt[b]; }

int cpt_to_byte(uint32_t cpt) {
  if (cpt < 256) {
    const bool printable = (cpt >= 0x21 && cpt <= 0x7E) || (cpt >= 0xA1 && cpt <= 0xAC) || (cpt >= 0xAE);
    return printable ? static_cast<int>(cpt) : -1;
  }
  const auto& a = alphabet().to_cpt;
  for (int b = 0; b < 256; ++b)
    if (a[b] == cpt) return b;
  return -1;
}

}  // namespace dinoml::tokenizer
