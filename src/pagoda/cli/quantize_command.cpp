// `pagoda quantize`: writes a quantized HF checkpoint from an unquantized HF checkpoint or F32/F16/BF16 GGUF
// file (quantize/quantize_checkpoint.h) and prints the per-layer error table on stderr.
#include <cstdio>
#include <memory>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/model_options.h"
#include "pagoda/core/error.h"
#include "pagoda/quantize/quantize_checkpoint.h"
#include "pagoda/quantize/quantize_report.h"

namespace pagoda::cli {
namespace {

using namespace pagoda::quantizer;

struct QuantizeCliOptions {
  QuantizeOptions q;
  std::string method = "rtn";
  std::string format;  // "": awq for --bits 4, compressed-tensors for --bits 8
  bool no_duo_scaling = false;
  bool no_clip = false;
  bool quiet = false;
};

void run_quantize(QuantizeCliOptions& o) {
  o.q.method = o.method == "awq" ? QuantizeMethod::kAwq : QuantizeMethod::kRtn;
  if (o.format == "fp8")
    o.q.format = QuantizeFormat::kFp8;
  else if (o.format == "compressed-tensors" || (o.format.empty() && o.q.bits == 8))
    o.q.format = QuantizeFormat::kCompressedTensors;
  else
    o.q.format = QuantizeFormat::kAwq;
  o.q.awq.duo_scaling = !o.no_duo_scaling;
  o.q.awq.clip = !o.no_clip;
  validate_options(o.q);  // before looking for the bundled text: option errors first
  if (o.q.method == QuantizeMethod::kAwq && o.q.calibration.text_file.empty())
    o.q.calibration.text_file = default_calibration_path();
  o.q.show_progress = !o.quiet;
  const QuantizeSummary summary = quantize_checkpoint(o.q);
  if (!o.quiet) std::fputs(format_summary(o.q, summary).c_str(), stderr);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Quantize an HF safetensors checkpoint or a GGUF file into an HF checkpoint: RTN or AWQ W4 (AutoAWQ GEMM), "
      "W8A16 or FP8 (compressed-tensors)");
  cmd->add_option("-m,--model", o->q.model_path,
                  "unquantized HF safetensors directory or llama .gguf file (F32, F16 or BF16 weights)")
      ->required();
  cmd->add_option("-o,--out", o->q.out_dir, "output directory")->required();
  cmd->add_option("--tokenizer", o->q.tokenizer_dir,
                  "HF directory whose tokenizer.json, tokenizer_config.json, special_tokens_map.json, "
                  "generation_config.json (and tokenizer.model) are copied into --out; a GGUF input has none of its "
                  "own to copy");
  cmd->add_option("--method", o->method, "rtn | awq (default rtn)")->check(CLI::IsMember({"rtn", "awq"}));
  cmd->add_option("--bits", o->q.bits, "4 (AutoAWQ GEMM, zero points) or 8 (W8A16 per channel, or FP8 with --format fp8)");
  cmd->add_option("--group-size", o->q.group_size, "4-bit group size along in_features (default 128)");
  cmd->add_option("--format", o->format,
                  "fp8 (compressed-tensors FP8_DYNAMIC, with --bits 8) | compressed-tensors (pack-quantized W4A16/W8A16) "
                  "| awq (default for --bits 4)")
      ->check(CLI::IsMember({"fp8", "compressed-tensors", "awq"}));
  cmd->add_option("--calibration-file", o->q.calibration.text_file,
                  "AWQ calibration text, one sample a line (default: the bundled TinyStories sample)");
  cmd->add_option("--calibration-samples", o->q.calibration.num_samples, "AWQ: lines of calibration text used (default 128)");
  cmd->add_option("--calibration-seq-len", o->q.calibration.seq_len, "AWQ: tokens per calibration block (default 512)");
  cmd->add_option("--scale-grid", o->q.awq.scale_grid, "AWQ: ratios tried by the scale search (default 20)");
  cmd->add_option("--clip-grid", o->q.awq.clip_grid, "AWQ: grid of the clipping search (default 20; max shrink 0.5)");
  cmd->add_flag("--no-duo-scaling", o->no_duo_scaling, "AWQ: scales from activations alone (x_mean^r)");
  cmd->add_flag("--no-clip", o->no_clip, "AWQ: skip the clipping search");
  cmd->add_flag("--force", o->q.force, "write into an existing non-empty --out directory");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress bar and no error table");
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace pagoda::cli
