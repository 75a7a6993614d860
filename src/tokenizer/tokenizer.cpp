#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "import/gguf/gguf.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace dinoml::tokenizer {

namespace {
bool has_type(const Vocab& v, int32_t id, int32_t type) {
  return id >= 0 && static_cast<size_t>(id) < v.types.size() && v.types[id] == type;
}
}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : v_(std::move(vocab)) {
  const size_t n = v_.tokens.size();
  if (n == 0) throw TokenizerError("the vocabulary has no tokens (tokenizer.ggml.tokens is empty)");
  v_.types.resize(n, kTypeNormal);
  v_.scores.resize(n, 0.0f);
  to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (v_.tokens[i].empty()) v_.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    to_id_[v_.tokens[i]] = static_cast<int32_t>(i);  // a repeated text maps to its last id
  }
  if (v_.model == ModelType::bpe) {
    bpe_ranks_.reserve(v_.merges.size());
    for (size_t i = 0; i < v_.merges.size(); ++i) {
      const std::string& m = v_.merges[i];
      const size_t pos = m.find(' ', 1);
      std::string key = pos == std::string::npos ? std::string(1, '\0') : m.substr(0, pos) + '\0' + m.substr(pos + 1);
      bpe_ranks_.emplace(std::move(key), static_cast<int32_t>(i));  // the first of repeated merges wins
    }
    splitter_ = std::make_unique<RegexSplitter>(pre_tokenizer_spec(v_.pre).regexes);
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = v_.types[i];
    if (t == kTypeControl || t == kTypeUserDefined || t == kTypeUnknown) special_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(special_.begin(), special_.end(),
                   [&](int32_t a, int32_t b) { return v_.tokens[a].size() > v_.tokens[b].size(); });
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_gguf(const std::string& path) {
  try {
    return Tokenizer(vocab_from_gguf(gguf::File::open(path)));
  } catch (const gguf::GgufError& e) {
    throw TokenizerError(e.what());
  } catch (const TokenizerError& e) {
    throw TokenizerError(path + ": " + e.what());
  }
}

int32_t Tokenizer::token_id(const std::string& text) const {
  auto it = to_id_.find(text);
  return it == to_id_.end() ? kNoToken : it->second;
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({kNoToken, 0, text.size()});
  for (int32_t id : special_) {
    const int32_t type = v_.types[id];
    if (!parse_special && (type == kTypeControl || type == kTypeUnknown)) continue;
    const std::string& tok = v_.tokens[id];
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t off = f.offset, len = f.len;
      while (len > 0) {
        const size_t m = text.substr(0, off + len).find(tok, off);
        if (m == std::string_view::npos) break;
        if (m > off) next.push_back({kNoToken, off, m - off});
        next.push_back({id, 0, 0});
        off = m + tok.size();
        len = f.offset + f.len - off;
      }
      if (len > 0) next.push_back({kNoToken, off, len});
    }
    frags = std::move(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  const auto frags = partition(text, parse_special);
  if (add_special && v_.add_bos) {
    if (v_.bos == kNoToken) throw TokenizerError("the vocabulary asks for a BOS token but has no bos_token_id");
    out.push_back(v_.bos);
  }
  if (v_.model == ModelType::spm) {
    bool prev_special = true;  // the first text fragment gets the space prefix
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string s = v_.add_space_prefix && prev_special ? " " : "";
      s.append(text.substr(f.offset, f.len));
      std::string escaped;
      escaped.reserve(s.size() + s.size() / 2);
      for (char c : s) {
        if (c == ' ') escaped += "\xE2\x96\x81";  // ▁
        else escaped += c;
      }
      encode_spm(escaped, out);
      prev_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) out.push_back(f.token);
      else encode_bpe(text.substr(f.offset, f.len), out);
    }
  }
  if (add_special && v_.add_eos) {
    if (v_.eos == kNoToken) throw TokenizerError("the vocabulary asks for an EOS token but has no eos_token_id");
    out.push_back(v_.eos);
  }
  return out;
}

int32_t Tokenizer::byte_token(uint8_t b) const {
  static const char* hex = "0123456789ABCDEF";
  const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
  int32_t id = token_id(buf);
  if (id == kNoToken) id = token_id(std::string(1, static_cast<char>(b)));
  if (id == kNoToken) id = v_.unk;
  if (id == kNoToken)
    throw TokenizerError("byte 0x" + std::string(buf + 3, 2) + " has no token (<0x..>) and the vocabulary no unknown token");
  return id;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (id < 0 || static_cast<size_t>(id) >= v_.tokens.size())
    throw TokenizerError("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                         std::to_string(v_.tokens.size() - 1) + ")");
  const int32_t type = v_.types[id];
  const bool is_special = type == kTypeControl || type == kTypeUnknown;
  if (is_special && !special) return "";
  const std::string& t = v_.tokens[id];
  if (is_special || type == kTypeUserDefined) return t;
  if (v_.model == ModelType::spm) {
    if (type == kTypeNormal) {
      std::string r;
      r.reserve(t.size());
      for (size_t i = 0; i < t.size(); ++i) {
        if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
          r += ' ';
          i += 2;
        } else {
          r += t[i];
        }
      }
      return r;
    }
    if (type == kTypeByte) {  // "<0xNN>"
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0) return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      return t.substr(0, 1);
    }
    return "";
  }
  if (type == kTypeByte && t.size() == 6 && t.compare(0, 3, "<0x") == 0)
    return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
  if (type != kTypeNormal) return "";
  std::string r;
  for (uint32_t c : utf8_to_cpts(t)) {
    const int b = cpt_to_byte(c);
    if (b >= 0) {
      r += static_cast<char>(b);
    } else {  // not of the byte alphabet: llama.cpp's marker
      std::string u;
      append_utf8(u, c);
      char hx[3];
      r += "[UNK_BYTE_0x";
      for (char ch : u) {
        snprintf(hx, sizeof hx, "%02x", static_cast<uint8_t>(ch));
        r += hx;
      }
      r += t + "]";
    }
  }
  return r;
}

namespace {
// llama.cpp's decode clean-up (clean_spaces): " ?", " !", " .", " ," lose the space; a lone
// " ' " becomes "'"; " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it).
void clean_spaces(std::string& text) {
  if (text.empty()) return;
  std::string o;
  o.reserve(text.size());
  o += text[0];
  for (size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) o.pop_back();
    o += x;
  }
  text.swap(o);
  o.clear();
  o += text[0];
  for (size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    o += x;
    if (x == '\'' && i + 1 < text.size() && text[i - 1] == ' ' && text[i + 1] == ' ') {
      o.erase(o.size() - 2, 1);  // the space before
      text[++i] = '\0';          // and the one after (no longer a space for the next check)
    }
  }
  text.swap(o);
  o.clear();
  o += text[0];
  for (size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < text.size()) {
      const char x1 = text[i + 1];
      const char x2 = i + 2 < text.size() ? text[i + 2] : 0;
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) o.pop_back();
    }
    o += x;
  }
  text.swap(o);
}
}  // namespace

std::string Tokenizer::decode(const std::vector<int32_t>& ids_in, bool remove_special, bool unparse_special) const {
  size_t b = 0, e = ids_in.size();
  bool remove_space = v_.add_space_prefix;
  if (remove_special && v_.add_bos && e > b && ids_in[b] == v_.bos) {
    remove_space = false;
    ++b;
  }
  if (remove_special && v_.add_eos && e > b && ids_in[e - 1] == v_.eos) --e;
  std::string text;
  for (size_t i = b; i < e; ++i) {
    std::string piece = token_to_piece(ids_in[i], unparse_special);
    if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    remove_space = false;
    text += piece;
  }
  if (v_.clean_spaces) clean_spaces(text);
  return text;
}

}  // namespace dinoml::tokenizer
