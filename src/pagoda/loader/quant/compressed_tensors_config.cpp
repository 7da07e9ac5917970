// compressed-tensors quantization_config: the config groups' weight schemes and the module matching that
// decides which scheme a module was stored in. Sources: vllm-project/compressed-tensors @ac8e2ba (v0.18.0)
// quantization/quant_args.py (QuantizationArgs and its validator), quantization/lifecycle/apply.py
// (apply_quantization_config, _scheme_from_targets), utils/match.py (match_named_modules, match_targets,
// match_name, _match_class); docs/QUANTIZATION.md sums them up.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pagoda/loader/quant/compressed_tensors_config.h"

#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

namespace pagoda::quant {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_regex(const std::string& target) { return target.rfind("re:", 0) == 0; }

// A config's patterns are short ("re:.*mlp.down_proj$"); a long one is an attack or a mistake, and is refused
// before it is compiled.
constexpr size_t kMaxPatternBytes = 4096;
// Backtracking steps one match may take (PCRE2's match limit): a pattern such as (.*)*X would otherwise take
// exponential time on every module name. Real patterns take tens.
constexpr uint32_t kMatchLimit = 1'000'000;

// `text` for an error message: at most 200 bytes of it.
std::string shown(const std::string& text) { return text.size() <= 200 ? text : text.substr(0, 200) + "..."; }

// A "re:" target compiled with PCRE2, whose syntax is Python's for what the tools write (".*", "\d", classes,
// groups, alternation, "$", (?P<name>...), (?i)); nesting is bounded by PCRE2 (250 levels) and matching by
// kMatchLimit, so no pattern can overflow the stack or hang the loader.
class ModulePattern {
 public:
  // Throws std::runtime_error with PCRE2's message when the pattern cannot be compiled.
  explicit ModulePattern(const std::string& pattern) {
    if (pattern.size() > kMaxPatternBytes)
      throw std::runtime_error(fmt::format("{} bytes long (at most {})", pattern.size(), kMaxPatternBytes));
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF, &error, &offset,
                          nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      throw std::runtime_error(fmt::format("{} at offset {}", reinterpret_cast<const char*>(message), offset));
    }
  }
  ~ModulePattern() { pcre2_code_free(code_); }
  ModulePattern(const ModulePattern&) = delete;
  ModulePattern& operator=(const ModulePattern&) = delete;

  // re.match: anchored at the start of `name`. nullopt when the match limit was reached.
  std::optional<bool> match_start(const std::string& name) const {
    pcre2_match_data* data = pcre2_match_data_create_from_pattern(code_, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context, kMatchLimit);
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(), 0, PCRE2_ANCHORED, data,
                               context);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT) return std::nullopt;
    return rc >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
};

// match.py match_name: "re:" + a Python regular expression applied with re.match, which anchors it at the start
// of the name only ("re:model.layers.0" takes every module of layer 0, "re:.*down_proj" every down_proj); any
// other target is an exact module name. Patterns that do not compile were refused at parse time
// (check_patterns); one that takes too long to match a name is a LoadError.
bool matches_name(const std::string& module, const std::string& target) {
  if (!is_regex(target)) return module == target;
  const std::optional<bool> m = ModulePattern(target.substr(3)).match_start(module);
  if (!m)
    throw LoadError("quantization_config",
                    fmt::format("the pattern \"{}\" takes too long to match the module name {} (more than {} steps)",
                                shown(target), module, kMatchLimit));
  return *m;
}

// match.py _match_class: the name of a class in the module's MRO. Pagoda's linears are torch.nn.Linear in
// transformers, whose MRO holds Linear and Module (vLLM's LinearBase also answers to "Linear"); any other class
// name (LlamaAttention, Embedding, ...) names modules that are not these linears.
bool matches_class(const std::string& target) { return target == "Linear" || target == "Module"; }

bool matches(const std::string& module, const std::string& target) {
  return matches_name(module, target) || matches_class(target);
}

// Each "re:" entry of `list` (the field `key` of `f`) must compile, so that a pattern PCRE2 cannot read is a
// LoadError here and not a miss later.
void check_patterns(const QuantFields& f, const std::string& key, const std::vector<std::string>& list) {
  for (const std::string& target : list) {
    if (!is_regex(target)) continue;
    try {
      ModulePattern pattern(target.substr(3));
    } catch (const std::runtime_error& e) {
      f.fail(key, fmt::format("entry \"{}\" is not a regular expression this loader can read: {}", shown(target), e.what()));
    }
  }
}

// quant_args.py validate_actorder: true or "group" (alias "dynamic") stores weight_g_idx, the group of each
// input column; "weight" (alias "static") or false/null only changed GPTQ's calibration order, so the groups
// stay k / group_size and no g_idx is stored. Returns "group", "weight" or "".
std::string actorder_of(const QuantFields& w) {
  const Json* a = w.get("actorder");
  if (a == nullptr) return "";
  if (a->is_boolean()) return a->get<bool>() ? "group" : "";
  if (!a->is_string()) w.fail("actorder", "must be \"group\", \"weight\", true, false or null");
  const std::string v = lower(a->get<std::string>());
  if (v == "group" || v == "dynamic") return "group";
  if (v == "weight" || v == "static") return "weight";
  w.fail("actorder", fmt::format("is \"{}\"; expected group, weight, dynamic or static", v));
}

// The group's FP8 activation scheme: llm-compressor's FP8_DYNAMIC (dynamic, strategy token) or FP8 (static,
// strategy tensor: an input_scale per linear). A dynamic per-tensor scheme is computed per token (at least
// as accurate, and no reduction over the batch). Any other one (int8 or FP4 activations) is a different model.
ActivationQuant parse_activations(const QuantFields& group) {
  if (group.get("output_activations") != nullptr)
    group.fail("output_activations", "is set; output activation quantization is not supported");
  if (group.get("input_activations") == nullptr) return ActivationQuant::kNone;
  const QuantFields a = group.sub("input_activations");
  const std::string type = lower(a.string("type", "int"));
  const int64_t bits = a.integer("num_bits", 8);
  if (type != "float" || bits != 8)
    a.fail("type", fmt::format("is \"{}\" with num_bits {}: only FP8 activation schemes are supported", type, bits));
  const bool dynamic = a.boolean("dynamic", false);
  const std::string strategy = lower(a.string("strategy", "tensor"));
  if (strategy != "token" && strategy != "tensor")
    a.fail("strategy", fmt::format("is \"{}\"; FP8 activations support token and tensor", strategy));
  if (!dynamic && strategy != "tensor")
    a.fail("dynamic", fmt::format("is false with strategy \"{}\"; static activation scales are per tensor", strategy));
  return dynamic ? ActivationQuant::kFp8PerToken : ActivationQuant::kFp8Static;
}

// One config group's weights (QuantizationArgs) in `format` -> a scheme.
QuantConfig parse_group(const QuantFields& group, const std::string& name, const std::string& format) {
  QuantConfig s{.method = QuantMethod::kCompressedTensors, .name = "compressed-tensors"};
  s.group = name;
  const ActivationQuant activations = parse_activations(group);
  const QuantFields w = group.sub("weights");
  const std::string type = lower(w.string("type", "int"));
  if (const Json* d = w.get("dynamic"); d != nullptr && !(d->is_boolean() && !d->get<bool>()))
    w.fail("dynamic", fmt::format("is {}; weights need stored scales (dynamic false)", d->dump()));
  // The validator infers a missing strategy from group_size: absent -> tensor, -1 -> channel, > 0 -> group.
  std::string strategy = lower(w.string("strategy", ""));
  if (strategy.empty())
    strategy = w.get("group_size") == nullptr ? "tensor" : w.integer("group_size", 0) == -1 ? "channel" : "group";
  const std::string actorder = actorder_of(w);
  if (actorder == "group" && strategy != "group")
    w.fail("actorder", fmt::format("is \"group\" with strategy \"{}\"; activation ordering needs strategy group",
                                   strategy));
  s.desc_act = actorder == "group";
  if (format == "pack-quantized") {
    if (type != "int") w.fail("type", fmt::format("is \"{}\"; pack-quantized holds int weights", type));
    s.bits = bits_of(w, "num_bits", {4, 8});
    if (activations != ActivationQuant::kNone)  // W4A8 / W8A8 with int weights: no such kernel here
      spdlog::warn("compressed-tensors group {}: int{} weights with FP8 input_activations; Pagoda runs them weight-only "
                   "(W{}A16: inputs stay bf16), so outputs differ slightly from an engine that quantizes the inputs",
                   name, s.bits, s.bits);
    s.symmetric = w.boolean("symmetric", true);  // false: a weight_zero_point per row and group
    if (strategy == "group") {
      s.group_size = w.integer("group_size", -1);
      if (s.group_size <= 0 || s.group_size % 2 != 0)
        w.fail("group_size", fmt::format("must be a positive even number for strategy group, got {}", s.group_size));
    } else if (strategy != "channel") {
      w.fail("strategy", fmt::format("is \"{}\"; supported: group, channel", strategy));
    }
  } else if (format == "float-quantized") {
    if (type != "float") w.fail("type", fmt::format("is \"{}\"; float-quantized holds float weights", type));
    s.bits = bits_of(w, "num_bits", {8});
    s.is_float = true;
    // FP8 inputs (W8A8) only with FP8 weights; an int weight group keeps FP8 input_activations unapplied.
    s.activations = activations;
    if (strategy == "block") {  // block_structure [bn, bk]: weight_scale [ceil(N / bn), ceil(K / bk)]
      const Json* b = w.get("block_structure");
      if (b == nullptr || !b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
          !(*b)[1].is_number_integer() || (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0)
        w.fail("block_structure", "must be two positive integers [block_n, block_k] for strategy block");
      s.fp8_block_n = (*b)[0].get<int64_t>();
      s.fp8_block_k = (*b)[1].get<int64_t>();
    } else if (strategy != "channel" && strategy != "tensor") {
      w.fail("strategy", fmt::format("is \"{}\"; FP8 weights support channel, tensor and block", strategy));
    }
    if (!w.boolean("symmetric", true)) w.fail("symmetric", "is false; FP8 weights with zero points are not supported");
  } else {
    group.fail("format", fmt::format("is \"{}\"; supported: pack-quantized, float-quantized", format));
  }
  return s;
}

// sparsity_config: {} (or null) for dense weights; format "dense" keeps pruned weights as they are
// (config/dense.py), which loads like any other. The compressed sparse formats are not read.
// transform_config: weights stored under online rotations (QuIP, SpinQuant), which are not applied: refused.
void check_sparsity_and_transforms(const QuantFields& f) {
  if (const Json* sparsity = f.get("sparsity_config"); sparsity != nullptr && !sparsity->empty()) {
    const QuantFields s = f.sub("sparsity_config");
    const std::string format = s.string("format", "");
    if (format != "dense")
      s.fail("format", fmt::format("is \"{}\"; sparse compressed weights are not supported (only \"dense\")", format));
  }
  if (const Json* transforms = f.get("transform_config"); transforms != nullptr && !transforms->empty()) {
    const QuantFields t = f.sub("transform_config");
    const Json* groups = t.get("config_groups");
    if (groups != nullptr && !groups->empty())
      t.fail("config_groups", "is not empty; weights stored under online transforms (QuIP, SpinQuant) are not "
                              "supported");
  }
}

// kv_cache_scheme: a checkpoint's FP8 KV-cache scales (`k_scale` / `v_scale`), which are read past (the KV cache's
// dtype and scales are `--kv-cache-dtype`'s). Still checked as vLLM's CompressedTensorsKVCacheMethod checks it, so a
// scheme no engine can serve (int4, per-channel, asymmetric, garbage) is refused instead of silently taken.
void check_kv_cache_scheme(const QuantFields& f) {
  if (f.get("kv_cache_scheme") == nullptr) return;
  const QuantFields kv = f.sub("kv_cache_scheme");
  const std::string type = kv.string("type", "");
  const int64_t bits = kv.integer("num_bits", 0);
  if (type != "float" || bits != 8)
    kv.fail("type", fmt::format("\"{}\" with num_bits {}: only 8-bit float KV-cache schemes exist (vLLM's rule)", type,
                                bits));
  const std::string strategy = kv.string("strategy", "");
  if (strategy != "tensor" && strategy != "attn_head")
    kv.fail("strategy", fmt::format("is \"{}\"; a KV-cache scheme is per tensor or per attention head", strategy));
  if (!kv.boolean("symmetric", false)) kv.fail("symmetric", "must be true: KV-cache scales are symmetric");
}

}  // namespace

void parse_compressed_tensors(const QuantFields& f, QuantConfig& q) {
  const std::string status = f.string("quantization_status", "compressed");
  if (status != "compressed") f.fail("quantization_status", fmt::format("is \"{}\"; expected compressed", status));
  check_sparsity_and_transforms(f);
  check_kv_cache_scheme(f);
  const std::string format = f.string("format", "");  // a group's own "format" wins (mixed-precision)
  const QuantFields groups = f.sub("config_groups");
  for (auto it = groups.obj.begin(); it != groups.obj.end(); ++it) {
    const QuantFields group = groups.sub(it.key());
    q.groups.push_back(QuantGroup{group.strings("targets"), std::make_shared<const QuantConfig>(parse_group(
                                                                  group, it.key(), group.string("format", format)))});
    check_patterns(group, "targets", q.groups.back().targets);
  }
  q.not_converted = f.strings("ignore");
  check_patterns(f, "ignore", q.not_converted);
  if (q.groups.empty()) return;  // nothing quantized
  const QuantConfig& first = *q.groups.front().scheme;
  q.bits = first.bits;
  q.group_size = first.group_size;
  q.symmetric = first.symmetric;
  q.desc_act = first.desc_act;
  q.group = first.group;
  // --quantization fp8 asks for a checkpoint whose weights are FP8: every group's.
  q.is_float = std::all_of(q.groups.begin(), q.groups.end(), [](const QuantGroup& g) { return g.scheme->is_float; });
}

const QuantConfig* compressed_tensors_scheme_for(const QuantConfig& q, const std::string& module) {
  // match_named_modules: a module that an ignore entry matches, by name or class, is not quantized.
  for (const std::string& ignore : q.not_converted)
    if (matches(module, ignore)) return nullptr;
  // apply_quantization_config's target_to_scheme: a target listed by several groups belongs to the last.
  std::map<std::string, size_t> owner;
  for (size_t i = 0; i < q.groups.size(); ++i)
    for (const std::string& target : q.groups[i].targets) owner[target] = i;
  // match_targets orders the targets by (contains "re:", target): exact names, then regular expressions, each
  // alphabetically (not in the file's order); it lists those matching the name, then those matching the class,
  // and _scheme_from_targets takes the first. So an exact name beats a regex, a regex beats "Linear", and of two
  // matching regexes the alphabetically first wins (vLLM's find_matched_target takes the file's order there,
  // but the tensors were written in compressed-tensors' choice).
  std::vector<std::pair<std::string, size_t>> sorted(owner.begin(), owner.end());
  std::stable_partition(sorted.begin(), sorted.end(),
                        [](const auto& t) { return t.first.find("re:") == std::string::npos; });
  for (const auto& [target, group] : sorted)
    if (matches_name(module, target)) return q.groups[group].scheme.get();
  for (const auto& [target, group] : sorted)
    if (matches_class(target)) return q.groups[group].scheme.get();
  return nullptr;
}

}  // namespace pagoda::quant
