// CharSet, Grammar and GrammarBuilder (grammar.h).
#include "pagoda/structured/grammar.h"

#include <fmt/format.h>

#include <algorithm>

#include "pagoda/core/error.h"

namespace pagoda::structured {

namespace {
constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
}  // namespace

CharSet CharSet::range(uint32_t lo, uint32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

CharSet CharSet::any() {
  CharSet s;
  s.add(0, kSurrogateLo - 1).add(kSurrogateHi + 1, kMaxCodepoint);
  return s;
}

CharSet& CharSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return *this;
  ranges_.push_back({lo, std::min(hi, kMaxCodepoint)});
  std::sort(ranges_.begin(), ranges_.end(), [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : ranges_) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
  rebuild_ascii();
  return *this;
}

CharSet& CharSet::add(const CharSet& other) {
  for (const CodepointRange& r : other.ranges_) add(r.lo, r.hi);
  return *this;
}

CharSet CharSet::minus(const CharSet& other) const {
  CharSet out;
  for (const CodepointRange& r : ranges_) {
    uint32_t lo = r.lo;
    bool done = false;
    for (const CodepointRange& o : other.ranges_) {
      if (o.hi < lo || o.lo > r.hi) continue;
      if (o.lo > lo) out.add(lo, o.lo - 1);
      if (o.hi >= r.hi) {
        done = true;
        break;
      }
      lo = o.hi + 1;
    }
    if (!done) out.add(lo, r.hi);
  }
  return out;
}

CharSet CharSet::complement() const { return any().minus(*this); }

bool CharSet::contains(uint32_t cp) const {
  if (cp < 128) return (ascii_[cp >> 6] >> (cp & 63)) & 1;
  // The first range whose hi >= cp.
  const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), cp,
                                   [](const CodepointRange& r, uint32_t v) { return r.hi < v; });
  return it != ranges_.end() && it->lo <= cp;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), lo,
                                   [](const CodepointRange& r, uint32_t v) { return r.hi < v; });
  return it != ranges_.end() && it->lo <= hi;
}

bool CharSet::contains_all(const CharSet& other) const { return other.minus(*this).empty(); }

bool CharSet::disjoint(const CharSet& other) const {
  for (const CodepointRange& r : other.ranges_)
    if (intersects(r.lo, r.hi)) return false;
  return true;
}

std::string CharSet::key() const {
  std::string k;
  for (const CodepointRange& r : ranges_) k += fmt::format("{:x}-{:x},", r.lo, r.hi);
  return k;
}

void CharSet::rebuild_ascii() {
  ascii_[0] = ascii_[1] = 0;
  for (const CodepointRange& r : ranges_)
    for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 127); ++c) ascii_[c >> 6] |= uint64_t{1} << (c & 63);
}

namespace {

// Kosaraju's algorithm, iteratively (grammars from requests can be deep): a component id per node.
template <typename Edge>
std::vector<int> strongly_connected_components(const std::vector<std::vector<Edge>>& graph) {
  const size_t n = graph.size();
  std::vector<std::vector<int>> reverse(n);
  for (size_t u = 0; u < n; ++u)
    for (const Edge& e : graph[u]) reverse[static_cast<size_t>(e.to)].push_back(static_cast<int>(u));
  std::vector<int> order;
  std::vector<char> seen(n, 0);
  for (size_t start = 0; start < n; ++start) {
    if (seen[start]) continue;
    std::vector<std::pair<int, size_t>> stack{{static_cast<int>(start), 0}};
    seen[start] = 1;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      if (next < graph[static_cast<size_t>(u)].size()) {
        const int v = graph[static_cast<size_t>(u)][next++].to;
        if (!seen[static_cast<size_t>(v)]) {
          seen[static_cast<size_t>(v)] = 1;
          stack.push_back({v, 0});
        }
      } else {
        order.push_back(u);
        stack.pop_back();
      }
    }
  }
  std::vector<int> component(n, -1);
  int count = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (component[static_cast<size_t>(*it)] >= 0) continue;
    std::vector<int> stack{*it};
    component[static_cast<size_t>(*it)] = count;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (int v : reverse[static_cast<size_t>(u)])
        if (component[static_cast<size_t>(v)] < 0) {
          component[static_cast<size_t>(v)] = count;
          stack.push_back(v);
        }
    }
    ++count;
  }
  return component;
}

}  // namespace

int GrammarBuilder::add_rule(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  return static_cast<int>(rules_.size()) - 1;
}

void GrammarBuilder::add_alternative(int rule, Sequence sequence) {
  num_symbols_ += sequence.size() + 1;
  if (num_symbols_ > kMaxGrammarSymbols)
    throw InvalidRequest(fmt::format("the constraint's grammar is too large (over {} symbols)", kMaxGrammarSymbols));
  rules_.at(static_cast<size_t>(rule)).push_back(std::move(sequence));
}

int GrammarBuilder::rule(std::string name, std::vector<Sequence> alternatives) {
  const int r = add_rule(std::move(name));
  for (Sequence& s : alternatives) add_alternative(r, std::move(s));
  return r;
}

Symbol GrammarBuilder::chars(const CharSet& set) {
  const auto [it, added] = char_set_ids_.try_emplace(set.key(), static_cast<int32_t>(char_sets_.size()));
  if (added) char_sets_.push_back(set);
  return {Symbol::Kind::kChars, it->second};
}

GrammarBuilder::Sequence GrammarBuilder::literal(std::string_view utf8) {
  Sequence seq;
  for (size_t i = 0; i < utf8.size();) {
    const auto b = static_cast<unsigned char>(utf8[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    for (int k = 1; k < n && i + static_cast<size_t>(k) < utf8.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + static_cast<size_t>(k)]) & 0x3F);
    seq.push_back(chars(CharSet::of(cp)));
    i += static_cast<size_t>(n);
  }
  return seq;
}

void GrammarBuilder::mark_loop_set(Symbol chars) {
  if (chars.kind == Symbol::Kind::kChars && std::find(loop_sets_.begin(), loop_sets_.end(), chars.index) == loop_sets_.end())
    loop_sets_.push_back(chars.index);
}

int GrammarBuilder::star(std::string name, Sequence item) {
  const int r = add_rule(std::move(name));
  if (item.size() == 1) mark_loop_set(item[0]);
  item.push_back(ref(r));
  add_alternative(r, std::move(item));
  add_alternative(r, {});
  return r;
}

int GrammarBuilder::repeat(std::string name, const Sequence& item, int min, int max) {
  // tail_k: what may follow after k items were emitted.
  if (max >= 0 && max < min) throw InvalidRequest(fmt::format("{}: at most {} is below at least {}", name, max, min));
  int next = max < 0 ? star(name + "_more", item) : -1;
  const int last = max < 0 ? min : max;
  for (int k = last - 1; k >= 0; --k) {
    Sequence with = item;
    if (next >= 0) with.push_back(ref(next));
    std::vector<Sequence> alts{std::move(with)};
    if (k >= min) alts.push_back({});
    next = rule(fmt::format("{}_{}", name, k), std::move(alts));
  }
  if (next < 0) next = rule(name + "_0", {{}});
  return next;
}

Grammar GrammarBuilder::build(int root) {
  const size_t n = rules_.size();
  for (size_t r = 0; r < n; ++r) {
    if (rules_[r].empty()) throw InvalidRequest(fmt::format("grammar rule '{}' has no alternative", names_[r]));
    for (const Sequence& s : rules_[r])
      for (const Symbol& sym : s)
        if (sym.kind == Symbol::Kind::kRule && (sym.index < 0 || static_cast<size_t>(sym.index) >= n))
          throw InvalidRequest(fmt::format("grammar rule '{}' refers to an unknown rule", names_[r]));
  }
  // Which rules can match the empty string (a fixed point), then the "can start with" graph: an edge r -> s
  // when s is referenced where everything before it in an alternative of r is nullable.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Sequence& s : rules_[r]) {
        const bool all = std::all_of(s.begin(), s.end(), [&](const Symbol& sym) {
          return sym.kind == Symbol::Kind::kRule && nullable[static_cast<size_t>(sym.index)];
        });
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Calls in tail position return straight to the caller's caller (pushdown.h), so a cycle of such calls
  // only revisits stacks the expansion has seen; a cycle with one call that pushes a frame grows the stack
  // without end. Such a call is an edge inside a strongly connected component of the graph.
  struct Edge {
    int to;
    bool pushes;
  };
  std::vector<std::vector<Edge>> starts(n);
  for (size_t r = 0; r < n; ++r)
    for (const Sequence& s : rules_[r])
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k].kind != Symbol::Kind::kRule) break;
        starts[r].push_back({s[k].index, k + 1 < s.size()});
        if (!nullable[static_cast<size_t>(s[k].index)]) break;
      }
  const std::vector<int> component = strongly_connected_components(starts);
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : starts[r])
      if (e.pushes && component[r] == component[static_cast<size_t>(e.to)])
        throw InvalidRequest(fmt::format("grammar rule '{}' is left-recursive", names_[r]));

  // Which rules match some finite string (a fixed point): an alternative whose symbols all do completes.
  // Alternatives that cannot complete are dropped: the matcher would accept their prefixes and then be stuck
  // (a JSON schema's {"$ref": "#"} would let the model write forever, or nothing that ends).
  std::vector<char> finite(n, 0);
  const auto completes = [&](const Sequence& s) {
    return std::all_of(s.begin(), s.end(), [&](const Symbol& sym) {
      return sym.kind == Symbol::Kind::kRule ? finite[static_cast<size_t>(sym.index)] != 0
                                             : !char_sets_[static_cast<size_t>(sym.index)].empty();
    });
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      if (!finite[r] && std::any_of(rules_[r].begin(), rules_[r].end(), completes)) finite[r] = changed = true;
  }
  if (!finite[static_cast<size_t>(root)])
    throw EmptyGrammar(fmt::format("the constraint matches no complete output (rule '{}' never ends)", names_[root]));

  Grammar g;
  g.root_ = root;
  g.char_sets_ = char_sets_;
  g.loop_sets_ = loop_sets_;
  for (size_t r = 0; r < n; ++r) {
    Grammar::Rule rule{names_[r], {}};
    for (const Sequence& s : rules_[r]) {
      if (!completes(s)) continue;  // (a rule matching nothing keeps no alternative: nothing refers to it now)
      rule.alternatives.push_back(static_cast<int32_t>(g.symbols_.size()));
      g.symbols_.insert(g.symbols_.end(), s.begin(), s.end());
      g.symbols_.push_back({Symbol::Kind::kEnd, -1});
    }
    g.rules_.push_back(std::move(rule));
  }
  return g;
}

}  // namespace pagoda::structured
