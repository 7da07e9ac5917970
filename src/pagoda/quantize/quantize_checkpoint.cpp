// The quantization run: check everything that can fail before the long work (options, source, group sizes,
// --tokenizer, the output directory), quantize layer by layer (AWQ: calibration forward, searches, then RTN of the
// scaled weights), then write the tensors in name order, config.json and the copied files.
#include "pagoda/quantize/quantize_checkpoint.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/loader/hf_loader.h"
#include "pagoda/loader/progress_bar.h"
#include "pagoda/model/rope.h"
#include "pagoda/quantize/awq_writer.h"
#include "pagoda/quantize/compressed_tensors_writer.h"
#include "pagoda/quantize/dense_layer.h"
#include "pagoda/quantize/source_checkpoint.h"

namespace pagoda::quantizer {
namespace {

namespace fs = std::filesystem;

double relative_rms(const Matrix& ref, const Matrix& deq) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const double d = static_cast<double>(ref.data[i]) - deq.data[i];
    num += d * d;
    den += static_cast<double>(ref.data[i]) * ref.data[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The tensors that replace `module`.weight, and the summary row.
std::vector<SafetensorsEntry> quantize_linear(const QuantizeOptions& o, const std::string& module, const Matrix& w,
                                              DType scale_dtype, QuantizeSummary& summary) {
  LinearSummary row{module, w.rows, w.cols, 0};
  std::vector<SafetensorsEntry> out;
  if (o.format == QuantizeFormat::kAwq) {
    const AsymGroupCodes q = quantize_asym_groups(w, o.group_size);
    row.weight_rel_rms = relative_rms(w, dequantize_awq(q));
    out = awq_gemm_tensors(module, q);
  } else if (o.format == QuantizeFormat::kFp8) {
    const Fp8Codes q = quantize_fp8_channel(w, scale_dtype);
    row.weight_rel_rms = relative_rms(w, dequantize_fp8(q));
    out = float_quantized_tensors(module, q, scale_dtype);
  } else {
    const SymCodes q = quantize_sym_int(w, o.bits, o.bits == 8 ? 0 : o.group_size, scale_dtype);
    row.weight_rel_rms = relative_rms(w, dequantize_sym(q));
    out = pack_quantized_tensors(module, q, scale_dtype);
  }
  summary.linears.push_back(row);
  return out;
}

void check_shapes(const QuantizeOptions& o, const SourceCheckpoint& src) {
  for (int layer = 0; layer < src.config.num_layers; ++layer)
    for (const char* linear : kLinearNames) {
      const std::string name = fmt::format("model.layers.{}.{}.weight", layer, linear);
      const SafetensorsTensor& t = src.tensor(name);
      const int64_t n = t.shape[0], k = t.shape[1];
      if (o.format == QuantizeFormat::kFp8) continue;
      const int64_t g = o.bits == 8 ? k : o.group_size;
      if (k % g != 0)
        throw InvalidRequest(fmt::format("--group-size {} does not divide in_features {} of {}", g, k, name));
      if (o.format == QuantizeFormat::kAwq && n % 8 != 0)
        throw InvalidRequest(fmt::format("{}: out_features {} is not a multiple of 8 (AWQ GEMM packs 8 columns a word)",
                                         name, n));
      if (o.format == QuantizeFormat::kCompressedTensors && (k * o.bits) % 32 != 0)
        throw InvalidRequest(fmt::format("{}: in_features {} does not fill whole 32-bit words at {} bits", name, k,
                                         o.bits));
    }
}

void prepare_out_dir(const QuantizeOptions& o) {
  std::error_code ec;
  if (fs::exists(o.out_dir, ec)) {
    if (!fs::is_directory(o.out_dir, ec)) throw Error(fmt::format("--out {}: exists and is not a directory", o.out_dir));
    if (!fs::is_empty(o.out_dir, ec) && !o.force)
      throw Error(fmt::format("--out {}: directory is not empty (pass --force to write into it)", o.out_dir));
  } else if (!fs::create_directories(o.out_dir, ec) || ec) {
    throw Error(fmt::format("--out {}: cannot create the directory: {}", o.out_dir, ec.message()));
  }
  const fs::path probe = fs::path(o.out_dir) / ".pagoda-quantize-write-test";
  std::ofstream test(probe);
  if (!test) throw Error(fmt::format("--out {}: the directory is not writable", o.out_dir));
  test.close();
  fs::remove(probe, ec);
}

LayerShape layer_shape(const ModelConfig& c, const RopeParams& rope) {
  return {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size,
          static_cast<float>(c.rms_norm_eps), &rope};
}

DenseLayer read_layer(const SourceCheckpoint& src, int i) {
  const std::string p = fmt::format("model.layers.{}.", i);
  return {src.vector(p + "input_layernorm.weight"),  src.matrix(p + "self_attn.q_proj.weight"),
          src.matrix(p + "self_attn.k_proj.weight"), src.matrix(p + "self_attn.v_proj.weight"),
          src.matrix(p + "self_attn.o_proj.weight"), src.vector(p + "post_attention_layernorm.weight"),
          src.matrix(p + "mlp.gate_proj.weight"),    src.matrix(p + "mlp.up_proj.weight"),
          src.matrix(p + "mlp.down_proj.weight")};
}

const Matrix& layer_linear(const DenseLayer& l, const char* name) {
  const std::string n = name;
  if (n == "self_attn.q_proj") return l.wq;
  if (n == "self_attn.k_proj") return l.wk;
  if (n == "self_attn.v_proj") return l.wv;
  if (n == "self_attn.o_proj") return l.wo;
  if (n == "mlp.gate_proj") return l.w_gate;
  if (n == "mlp.up_proj") return l.w_up;
  return l.w_down;
}

// What --tokenizer DIR contributes: the files transformers' AutoTokenizer and GenerationConfig read.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                           "generation_config.json", "tokenizer.model"};

void copy_into(const fs::path& file, const QuantizeOptions& o) {
  std::error_code ec;
  fs::copy_file(file, fs::path(o.out_dir) / file.filename(), fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(fmt::format("{}: cannot copy into {}: {}", file.string(), o.out_dir, ec.message()));
}

void check_tokenizer_dir(const QuantizeOptions& o) {
  if (o.tokenizer_dir.empty()) return;
  std::error_code ec;
  if (!fs::is_directory(o.tokenizer_dir, ec)) throw LoadError(o.tokenizer_dir, "--tokenizer: not a directory");
  if (!fs::exists(fs::path(o.tokenizer_dir) / "tokenizer.json", ec))
    throw LoadError(o.tokenizer_dir, "--tokenizer: no tokenizer.json in the directory");
}

// A norm weight AWQ changed, in the source tensor's dtype.
SafetensorsEntry norm_entry(const SafetensorsTensor& t, const std::vector<float>& values) {
  return float_entry(t.name, t.dtype, t.shape, values);
}

nlohmann::ordered_json quantization_config(const QuantizeOptions& o) {
  if (o.format == QuantizeFormat::kAwq) return awq_quantization_config(o.group_size);
  if (o.format == QuantizeFormat::kFp8) return fp8_dynamic_config();
  return pack_quantized_config(o.bits, o.bits == 8 ? 0 : o.group_size);
}

void write_outputs(const QuantizeOptions& o, const SourceCheckpoint& src,
                   std::map<std::string, std::vector<SafetensorsEntry>>& replaced, QuantizeSummary& summary) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, t] : src.tensors) {
    if (auto it = replaced.find(name); it != replaced.end()) {
      for (SafetensorsEntry& e : it->second) entries.push_back(std::move(e));
      continue;
    }
    SafetensorsEntry e{name, t.dtype, t.shape, {}};
    e.data.assign(t.data, t.data + t.nbytes);
    entries.push_back(std::move(e));
  }
  std::vector<std::pair<std::string, std::string>> metadata(src.metadata.begin(), src.metadata.end());
  if (src.metadata.count("format") == 0) metadata.emplace_back("format", "pt");
  const fs::path out(o.out_dir);
  write_safetensors((out / "model.safetensors").string(), entries, metadata);

  nlohmann::ordered_json config = src.config_json;
  config["quantization_config"] = quantization_config(o);
  std::ofstream cfg(out / "config.json", std::ios::binary | std::ios::trunc);
  cfg << config.dump(2);
  cfg.close();
  if (!cfg) throw Error(fmt::format("{}: cannot write", (out / "config.json").string()));

  if (!src.files_dir.empty())
    for (const fs::directory_entry& f : fs::directory_iterator(src.files_dir)) {  // tokenizer, generation config, ...
      const std::string fname = f.path().filename().string();
      if (!f.is_regular_file() || fname == "config.json" || fname.ends_with(".safetensors") ||
          fname.ends_with(".safetensors.index.json"))
        continue;
      copy_into(f.path(), o);
    }
  if (!o.tokenizer_dir.empty())
    for (const char* fname : kTokenizerFiles)
      if (const fs::path f = fs::path(o.tokenizer_dir) / fname; fs::is_regular_file(f)) copy_into(f, o);
  std::error_code ec;
  summary.bytes_written = static_cast<int64_t>(fs::file_size(out / "model.safetensors", ec));
}

}  // namespace

void validate_options(const QuantizeOptions& o) {
  if (o.bits != 4 && o.bits != 8) throw InvalidRequest(fmt::format("--bits {}: must be 4 or 8", o.bits));
  if (o.method == QuantizeMethod::kAwq && o.bits != 4)
    throw InvalidRequest("--method awq quantizes to 4 bits only (AutoAWQ GEMM); use --bits 4 or --method rtn");
  if (o.method == QuantizeMethod::kAwq && o.format != QuantizeFormat::kAwq)
    throw InvalidRequest("--method awq writes the AutoAWQ GEMM format only");
  if (o.format == QuantizeFormat::kFp8 && o.bits != 8) throw InvalidRequest("--format fp8 needs --bits 8");
  if (o.format == QuantizeFormat::kAwq && o.bits != 4)
    throw InvalidRequest("the AutoAWQ GEMM format holds 4-bit weights; use --bits 4");
  if (o.bits == 4 && o.group_size <= 0)
    throw InvalidRequest(fmt::format("--group-size {}: must be positive", o.group_size));
  if (o.method == QuantizeMethod::kAwq) {
    if (o.calibration.num_samples <= 0) throw InvalidRequest("--calibration-samples must be positive");
    if (o.calibration.seq_len <= 0) throw InvalidRequest("--calibration-seq-len must be positive");
    if (o.awq.scale_grid <= 0 || o.awq.clip_grid <= 0) throw InvalidRequest("the AWQ grids must be positive");
  }
  if (o.out_dir.empty()) throw InvalidRequest("--out is required");
}

QuantizeSummary quantize_checkpoint(const QuantizeOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  validate_options(options);
  const SourceCheckpoint src = SourceCheckpoint::open(options.model_path);
  check_shapes(options, src);
  check_tokenizer_dir(options);
  std::unique_ptr<Tokenizer> tokenizer;
  if (options.method == QuantizeMethod::kAwq) {
    tokenizer = options.tokenizer_dir.empty() ? src.load_tokenizer()
                                              : load_hf_tokenizer_if_present(options.tokenizer_dir);
    if (!tokenizer)
      throw LoadError(src.path, src.format == SourceFormat::kGguf
                                    ? "no tokenizer.ggml.* metadata: AWQ needs a tokenizer for the calibration text "
                                      "(pass --tokenizer DIR)"
                                    : "no tokenizer.json: AWQ needs it to tokenize the calibration text");
  }
  prepare_out_dir(options);
  if (src.format == SourceFormat::kGguf && options.tokenizer_dir.empty())
    spdlog::warn("{}: GGUF input: the output gets no tokenizer files (GGUF vocabularies are not converted); pass "
                 "--tokenizer DIR (the HF model's directory) here, or load the output with --tokenizer DIR",
                 src.path);

  QuantizeSummary summary;
  std::map<std::string, std::vector<SafetensorsEntry>> replaced;
  const ModelConfig& c = src.config;
  const RopeParams rope = make_rope_params(c.rope, c.head_dim);
  const LayerShape shape = layer_shape(c, rope);
  AwqSearchOptions awq = options.awq;
  awq.group_size = options.group_size;
  Matrix x;  // AWQ: the current layer's input [tokens, hidden]
  Batch batch;
  if (options.method == QuantizeMethod::kAwq) {
    const auto blocks = calibration_blocks(options.calibration, *tokenizer);
    batch = {static_cast<int64_t>(blocks.size()), options.calibration.seq_len};
    x = embed_blocks(blocks, src.embeddings());
    summary.calibration_tokens = batch.tokens();
  }
  ProgressBar bar(options.method == QuantizeMethod::kAwq ? "awq" : "rtn", c.num_layers, "layers",
                  options.show_progress);
  for (int i = 0; i < c.num_layers; ++i) {
    DenseLayer layer = read_layer(src, i);
    const std::string prefix = fmt::format("model.layers.{}.", i);
    if (options.method == QuantizeMethod::kAwq) {
      LayerInputs inputs;
      Matrix next = layer_forward(layer, shape, batch, x, &inputs);  // from the unquantized layer, as AutoAWQ
      summary.awq_groups.push_back(awq_scale_and_clip_layer(layer, shape, batch, inputs, awq));
      x = std::move(next);
      for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) {
        const std::string name = prefix + norm + ".weight";
        replaced[name].push_back(norm_entry(src.tensor(name), norm[0] == 'i' ? layer.attn_norm : layer.ffn_norm));
      }
    }
    for (const char* linear : kLinearNames)
      replaced[prefix + linear + ".weight"] =
          quantize_linear(options, prefix + linear, layer_linear(layer, linear), src.linear_dtype, summary);
    bar.advance(1);
  }
  bar.finish();
  write_outputs(options, src, replaced, summary);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace pagoda::quantizer
