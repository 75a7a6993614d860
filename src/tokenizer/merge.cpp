// The two merge loops: SentencePiece-style (by score) and byte-level BPE (by merge rank). Both
// keep a doubly linked list of symbols over the input and a priority queue of candidate pairs;
// a popped pair whose symbols changed since it was queued is stale and skipped.
#include <map>
#include <queue>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace dinoml::tokenizer {

namespace {
struct Symbol {
  int prev, next;
  size_t off, n;  // bytes of the text
};

// Symbols of one UTF-8 character each (a truncated sequence at the end stays one symbol).
std::vector<Symbol> split_chars(const std::string& s) {
  std::vector<Symbol> syms;
  size_t off = 0;
  int index = 0;
  while (off < s.size()) {
    const size_t n = std::min(utf8_len(s[off]), s.size() - off);
    syms.push_back({index - 1, off + n == s.size() ? -1 : index + 1, off, n});
    off += n;
    ++index;
  }
  return syms;
}

// The merge loop of both tokenizers: offers every adjacent pair to try_pair (which queues the
// pairs that are tokens / merges), then pops the best queued pair until none is left. A popped
// pair whose symbols were merged away or changed since it was queued (`stale(pair, left, right)`)
// is skipped; otherwise the right symbol joins the left one and the two new neighbour pairs are
// offered to try_pair.
template <typename Queue, typename TryPair, typename Stale>
void merge_pairs(std::vector<Symbol>& syms, Queue& queue, TryPair& try_pair, Stale stale) {
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const auto p = queue.top();
    queue.pop();
    Symbol& l = syms[p.left];
    Symbol& r = syms[p.right];
    if (l.n == 0 || r.n == 0 || stale(p, l, r)) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }
}
}  // namespace

void Tokenizer::encode_spm(const std::string& text, std::vector<int32_t>& out) const {
  std::vector<Symbol> syms = split_chars(text);
  if (syms.empty()) return;
  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first; equal scores: leftmost first.
  auto worse = [](const Pair& a, const Pair& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  std::map<std::string, std::pair<int, int>> split_of;  // merged text -> the two symbols it came from
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    std::string s = text.substr(syms[l].off, syms[l].n + syms[r].n);
    const int32_t id = token_id(s);
    if (id == kNoToken) return;
    queue.push({l, r, v_.scores[id], s.size()});
    split_of[std::move(s)] = {l, r};
  };
  merge_pairs(syms, queue, try_pair, [](const Pair& p, const Symbol& l, const Symbol& r) { return l.n + r.n != p.size; });
  // A symbol that is no token is split back along the merges that made it; what is left
  // unmerged falls back to byte tokens.
  auto emit = [&](auto&& self, const Symbol& s) -> void {
    const std::string piece = text.substr(s.off, s.n);
    const int32_t id = token_id(piece);
    if (id != kNoToken) {
      out.push_back(id);
      return;
    }
    auto it = split_of.find(piece);
    if (it == split_of.end()) {
      for (char c : piece) out.push_back(byte_token(static_cast<uint8_t>(c)));
      return;
    }
    self(self, syms[it->second.first]);
    self(self, syms[it->second.second]);
  };
  for (int i = 0; i != -1; i = syms[i].next) emit(emit, syms[i]);
}

int Tokenizer::bpe_rank(const std::string& left, const std::string& right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key += left;
  key += '\0';
  key += right;
  auto it = bpe_ranks_.find(key);
  return it == bpe_ranks_.end() ? -1 : it->second;
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  const std::vector<uint32_t> cpts = utf8_to_cpts(text);
  const std::vector<size_t> pieces = splitter_->split(cpts);
  const bool ignore_merges = v_.ignore_merges;
  size_t start = 0;
  for (size_t len : pieces) {
    // The word's UTF-8 bytes spelled in the byte alphabet.
    std::string word;
    for (size_t i = start; i < start + len; ++i) {
      std::string u;
      append_utf8(u, cpts[i]);
      for (char c : u) append_utf8(word, byte_to_cpt(static_cast<uint8_t>(c)));
    }
    start += len;
    std::vector<Symbol> syms;
    if (ignore_merges && token_id(word) != kNoToken) {
      syms.push_back({-1, -1, 0, word.size()});
    } else {
      syms = split_chars(word);
    }
    struct Pair {
      int left, right;
      int rank;
      std::string text;
    };
    // Lowest rank first; equal ranks: leftmost first.
    auto worse = [](const Pair& a, const Pair& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); };
    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
    auto try_pair = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      std::string ls = word.substr(syms[l].off, syms[l].n), rs = word.substr(syms[r].off, syms[r].n);
      const int rank = bpe_rank(ls, rs);
      if (rank < 0) return;
      queue.push({l, r, rank, ls + rs});
    };
    merge_pairs(syms, queue, try_pair, [&](const Pair& p, const Symbol& l, const Symbol& r) {
      return word.compare(l.off, l.n + r.n, p.text) != 0 || l.n + r.n != p.text.size();
    });
    for (const Symbol& s : syms) {
      if (s.n == 0) continue;
      const std::string piece = word.substr(s.off, s.n);
      const int32_t id = token_id(piece);
      if (id != kNoToken) {
        out.push_back(id);
        continue;
      }
      // No token for the merged piece: single bytes that happen to be tokens, as llama.cpp does.
      for (char c : piece) {
        const int32_t b = token_id(std::string(1, c));
        if (b != kNoToken) out.push_back(b);
      }
    }
  }
}

}  // namespace dinoml::tokenizer
