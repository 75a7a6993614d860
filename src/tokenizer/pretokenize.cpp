#define PCRE2_CODE_UNIT_WIDTH 32
#include "tokenizer/pretokenize.h"

#include <pcre2.h>

#include <map>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace dinoml::tokenizer {

namespace {

// The regexes are llama.cpp's (llama-vocab.cpp), which adapt the tokenizer.json originals to an
// engine without inline case-insensitivity.
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Entry {
  std::vector<const char*> names;
  PreTokenizerSpec spec;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {{"default"},
       {{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, true}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {{kLlama3}, true, true, true}},
      {{"dbrx", "smaug-bpe"}, {{kLlama3}, false, false, true}},
      {{"qwen2", "deepseek-r1-qwen", "megrez"}, {{kQwen2}, false, false, false}},
      {{"stablelm2"}, {{kQwen2}, false, false, true}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt", "olmo", "jais",
        "exaone4"},
       {{kGpt2}, false, false, true}},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {{"\\p{N}", kGpt2}, false, false, true}},
      {{"command-r", "smollm"}, {{"\\p{N}", kGpt2}, false, false, false}},
      {{"deepseek-v3"},
       {{"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
         "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
         "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
        false, false, false}},
      {{"deepseek-coder"},
       {{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}, false, false, false}},
      {{"gpt-4o", "llama4"}, {{kGpt4o}, false, false, false}},
      {{"tekken"}, {{kTekken}, true, true, false}},
  };
  return t;
}

// llama.cpp's stand-ins for the classes in collapsed text, and what each \p{..} becomes.
struct ClassSubst {
  const char* pattern;
  CharClass cls;
  uint32_t unit;
  const char* ascii;
};
const ClassSubst kSubst[] = {
    {"\\p{N}", CharClass::number, 0xD1, "0-9"},
    {"\\p{L}", CharClass::letter, 0xD2, "A-Za-z"},
    {"\\p{P}", CharClass::punctuation, 0xD3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", CharClass::mark, 0xD4, ""},
    {"\\p{S}", CharClass::symbol, 0xD5, "\\$\\+<->\\^`\\|~"},
};

bool uses_classes(const std::string& re) {
  for (const auto& s : kSubst)
    if (re.find(s.pattern) != std::string::npos) return true;
  return false;
}

std::vector<uint32_t> collapse_pattern(const std::string& re) {
  std::vector<uint32_t> out;
  bool inside = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '[' && (i == 0 || re[i - 1] != '\\')) {
      out.push_back('[');
      inside = true;
      continue;
    }
    if (inside && c == ']' && re[i - 1] != '\\') {
      out.push_back(']');
      inside = false;
      continue;
    }
    if (c == '\\' && i + 4 < re.size() && re[i + 1] == 'p' && re[i + 2] == '{' && re[i + 4] == '}') {
      const std::string pat = re.substr(i, 5);
      for (const auto& s : kSubst) {
        if (pat != s.pattern) continue;
        if (!inside) out.push_back('[');
        out.push_back(s.unit);
        for (const char* a = s.ascii; *a; ++a) out.push_back(static_cast<uint8_t>(*a));
        if (!inside) out.push_back(']');
        i += 4;
        goto next;
      }
    }
    if (static_cast<uint8_t>(c) >= 0x80)
      throw TokenizerError("pre-tokenizer regex mixes Unicode classes and non-ASCII characters: " + re);
    out.push_back(static_cast<uint8_t>(c));
  next:;
  }
  return out;
}

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
  for (const auto& e : table())
    for (const char* n : e.names)
      if (pre == n) return e.spec;
  std::string known;
  for (const auto& n : known_pre_tokenizers()) known += (known.empty() ? "" : ", ") + n;
  throw TokenizerError("unknown BPE pre-tokenizer type '" + pre + "' (tokenizer.ggml.pre); known: " + known);
}

std::vector<std::string> known_pre_tokenizers() {
  std::vector<std::string> out;
  for (const auto& e : table())
    for (const char* n : e.names) out.emplace_back(n);
  return out;
}

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  bool collapsed = false;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes) {
  for (const auto& re : regexes) {
    auto c = std::make_unique<Compiled>();
    c->collapsed = uses_classes(re);
    std::vector<uint32_t> pattern = c->collapsed ? collapse_pattern(re) : utf8_to_cpts(re);
    int err = 0;
    PCRE2_SIZE at = 0;
    // No UTF/UCP: \s and classes mean what they mean to std::regex in the C locale (ASCII), which
    // the collapsed text and the \v stand-in for non-ASCII whitespace rely on.
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_DOLLAR_ENDONLY, &err,
                            &at, nullptr);
    if (!c->code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, 256);
      std::string msg;
      for (PCRE2_UCHAR* p = buf; *p; ++p) append_utf8(msg, *p);
      throw TokenizerError("pre-tokenizer regex does not compile (" + msg + " at " + std::to_string(at) + "): " + re);
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter is the fallback
    regexes_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<size_t> RegexSplitter::split(const std::vector<uint32_t>& cpts) const {
  std::vector<size_t> pieces = {cpts.size()};
  if (cpts.empty()) return {};
  std::vector<uint32_t> collapsed, plain;
  for (const auto& re : regexes_) {
    std::vector<uint32_t>& subject = re->collapsed ? collapsed : plain;
    if (subject.empty()) {
      subject.resize(cpts.size());
      for (size_t i = 0; i < cpts.size(); ++i) {
        const uint32_t c = cpts[i];
        if (c < 128) {
          subject[i] = c;
        } else if (is_whitespace(c)) {
          subject[i] = 0x0B;
        } else if (!re->collapsed) {
          subject[i] = c;
        } else {
          subject[i] = 0xD0;
          const CharClass cls = char_class(c);
          for (const auto& s : kSubst)
            if (s.cls == cls) subject[i] = s.unit;
        }
      }
    }
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    std::vector<size_t> out;
    size_t start = 0;
    for (size_t len : pieces) {
      const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data() + start);
      size_t pos = 0, last = 0;
      while (pos < len) {
        int rc = pcre2_match(re->code, s, len, pos, 0, md, nullptr);
        // JIT code runs on a fixed stack; a long run of one class can exhaust it: the interpreter
        // (heap-allocated backtracking frames) then takes over.
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(re->code, s, len, pos, PCRE2_NO_JIT, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR buf[256];
          pcre2_get_error_message(rc, buf, 256);
          std::string msg;
          for (PCRE2_UCHAR* q = buf; *q; ++q) append_utf8(msg, *q);
          throw TokenizerError("pre-tokenizer regex failed on the text (" + msg + ")");
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {  // an empty match matches nothing: look further on
          pos = ov[0] + 1;
          continue;
        }
        if (ov[0] > last) out.push_back(ov[0] - last);
        out.push_back(ov[1] - ov[0]);
        last = pos = ov[1];
      }
      if (last < len) out.push_back(len - last);
      start += len;
    }
    pcre2_match_data_free(md);
    pieces = std::move(out);
  }
  return pieces;
}

}  // namespace dinoml::tokenizer
