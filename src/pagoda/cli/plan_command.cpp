// `pagoda plan`: the throughput-precision model (plan/throughput_model.h). For batch sizes x weight precisions it
// predicts the decode step's latency and tokens/s at --context-len, marks the Pareto-optimal (latency,
// throughput) points, and predicts the prefill of an --input-len prompt; from the model's config and a device
// profile only: no weights are read and nothing runs on a device.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/model_options.h"
#include "pagoda/cli/number_checks.h"
#include "pagoda/core/error.h"
#include "pagoda/plan/model_source.h"
#include "pagoda/plan/throughput_model.h"

namespace pagoda::cli {
namespace {

using plan::Precision;

struct PlanCliOptions {
  std::string model;  // empty: the bundled stories260K
  std::string device_profile = "h200";
  std::optional<double> bandwidth_gbs, bf16_tflops, fp8_tflops, step_overhead_us;
  std::vector<int64_t> batch_sizes{1, 4, 16, 64, 256};
  std::vector<std::string> precisions{"bf16", "fp8", "int8", "awq"};
  int64_t context_len = 128;
  int64_t input_len = 1024;
  int64_t max_num_batched_tokens = 2048;
  std::string kv_cache_dtype = "auto";
  std::string quantize_lm_head = "none";
  bool json = false;
};

plan::DeviceProfile resolve_profile(const PlanCliOptions& o) {
  plan::DeviceProfile d = plan::device_profile(o.device_profile);
  if (o.bandwidth_gbs) d.bandwidth_gbs = *o.bandwidth_gbs;
  if (o.bf16_tflops) d.bf16_tflops = *o.bf16_tflops;
  if (o.fp8_tflops) d.fp8_tflops = *o.fp8_tflops;
  if (o.step_overhead_us) d.step_overhead_us = *o.step_overhead_us;
  return d;
}

nlohmann::json profile_json(const plan::DeviceProfile& d) {
  auto kernel = [](const plan::StreamingKernel& k) {
    return nlohmann::json{{"bandwidth_fraction", k.bandwidth_fraction}, {"extra_token_tflops", k.extra_token_tflops}};
  };
  return {{"name", d.name},
          {"bandwidth_gbs", d.bandwidth_gbs},
          {"bf16_tflops", d.bf16_tflops},
          {"fp8_tflops", d.fp8_tflops},
          {"step_overhead_us", d.step_overhead_us},
          {"small_kernel_us", d.small_kernel_us},
          {"attention_fixed_us", d.attention_fixed_us},
          {"gemm_fixed_us", d.gemm_fixed_us},
          {"skinny_bf16", kernel(d.skinny_bf16)},
          {"gemv_int4", kernel(d.gemv_int4)},
          {"gemv_int8", kernel(d.gemv_int8)},
          {"few_int4", kernel(d.few_int4)},
          {"few_int8", kernel(d.few_int8)},
          {"gemv_fp8", kernel(d.gemv_fp8)},
          {"bf16_gemm_efficiency", d.bf16_gemm_efficiency},
          {"fp8_gemm_efficiency", d.fp8_gemm_efficiency},
          {"dequant_write_fraction", d.dequant_write_fraction},
          {"attention_bf16_fraction", d.attention_bf16_fraction},
          {"attention_fp8_fraction", d.attention_fp8_fraction}};
}

nlohmann::json cost_json(const plan::StepCost& c) {
  return {{"seconds", c.seconds},
          {"path", c.path},
          {"breakdown_seconds",
           {{"linears", c.linear_s}, {"lm_head", c.lm_head_s}, {"attention", c.attention_s}, {"other", c.other_s}}},
          {"weight_bytes", c.weight_bytes},
          {"scratch_bytes", c.scratch_bytes},
          {"kv_bytes", c.kv_bytes},
          {"activation_bytes", c.activation_bytes},
          {"flops", c.flops}};
}

// --quantize-lm-head's name as the precision the plan models (w4: AWQ's form, groups of 128 with zero points).
Precision lm_head_precision(const std::string& name) {
  return name == "fp8" ? Precision::kFp8 : name == "int8" ? Precision::kInt8 : name == "w4" ? Precision::kAwq : Precision::kBf16;
}

void run_plan(const PlanCliOptions& o) {
  std::vector<Precision> precisions;
  for (const std::string& name : o.precisions) {
    const std::optional<Precision> p = plan::parse_precision(name);
    if (!p) throw Error(fmt::format("--precisions: unknown precision \"{}\" (bf16, fp8, int8, awq)", name));
    precisions.push_back(*p);
  }
  const std::string path = o.model.empty() ? default_model_path() : o.model;
  const plan::ModelShape shape = plan::ModelShape::from_config(plan::read_model_config(path));
  const plan::DeviceProfile device = resolve_profile(o);
  const plan::PlanOptions options{.kv_fp8 = o.kv_cache_dtype == "fp8", .lm_head = lm_head_precision(o.quantize_lm_head)};
  const std::string lm_head = o.quantize_lm_head == "none" ? "bf16" : o.quantize_lm_head;  // as printed

  std::vector<plan::PlanPoint> points;
  for (Precision p : precisions) {
    for (int64_t batch : o.batch_sizes) {
      plan::PlanPoint point;
      point.precision = p;
      point.batch = batch;
      point.decode = plan::predict_step(shape, p, plan::decode_step(batch, o.context_len), device, options);
      point.tokens_per_s_per_seq = 1.0 / point.decode.seconds;
      point.tokens_per_s = static_cast<double>(batch) * point.tokens_per_s_per_seq;
      points.push_back(point);
    }
  }
  plan::mark_pareto(points);
  std::vector<std::pair<Precision, plan::StepCost>> prefills;
  for (Precision p : precisions)
    prefills.emplace_back(p, plan::predict_prefill(shape, p, o.input_len, o.max_num_batched_tokens, device, options));

  if (o.json) {
    nlohmann::json decode = nlohmann::json::array(), prefill = nlohmann::json::array();
    for (const plan::PlanPoint& pt : points)
      decode.push_back({{"precision", plan::precision_name(pt.precision)},
                        {"batch_size", pt.batch},
                        {"step_seconds", pt.decode.seconds},
                        {"tokens_per_second", pt.tokens_per_s},
                        {"tokens_per_second_per_sequence", pt.tokens_per_s_per_seq},
                        {"pareto", pt.pareto},
                        {"step", cost_json(pt.decode)}});
    for (const auto& [p, cost] : prefills)
      prefill.push_back({{"precision", plan::precision_name(p)},
                         {"seconds", cost.seconds},
                         {"tokens_per_second", static_cast<double>(o.input_len) / cost.seconds},
                         {"step", cost_json(cost)}});
    const nlohmann::json j = {{"model",
                               {{"path", path},
                                {"layers", shape.layers},
                                {"hidden", shape.hidden},
                                {"intermediate", shape.intermediate},
                                {"heads", shape.heads},
                                {"kv_heads", shape.kv_heads},
                                {"head_dim", shape.head_dim},
                                {"vocab", shape.vocab}}},
                              {"device_profile", profile_json(device)},
                              {"context_len", o.context_len},
                              {"input_len", o.input_len},
                              {"max_num_batched_tokens", o.max_num_batched_tokens},
                              {"kv_cache_dtype", options.kv_fp8 ? "fp8" : "bf16"},
                              {"lm_head", lm_head},
                              {"decode", decode},
                              {"prefill", prefill}};
    std::puts(j.dump(2).c_str());
    return;
  }

  fmt::print("model:   {} ({} layers, hidden {}, ffn {}, heads {} / kv {}, head_dim {}, vocab {})\n", path,
             shape.layers, shape.hidden, shape.intermediate, shape.heads, shape.kv_heads, shape.head_dim, shape.vocab);
  fmt::print("device:  {} ({:g} GB/s, bf16 {:g} TFLOP/s x {:g} in GEMMs, fp8 {:g} x {:g}, step overhead {:g} us)\n",
             device.name, device.bandwidth_gbs, device.bf16_tflops, device.bf16_gemm_efficiency, device.fp8_tflops,
             device.fp8_gemm_efficiency, device.step_overhead_us);
  fmt::print("decode at {} tokens of context (KV {}, lm_head {}), one step of all the batch's sequences:\n",
             o.context_len, options.kv_fp8 ? "fp8" : "bf16", lm_head);
  fmt::print("  {:<11} {:>6} {:>9} {:>10} {:>10} {:>9} {:>8} {:>9}  {:<16} {}\n", "precision", "batch", "step ms",
             "tok/s", "tok/s/seq", "weight GB", "KV GB", "TFLOP", "linears", "pareto");
  for (const plan::PlanPoint& pt : points)
    fmt::print("  {:<11} {:>6} {:>9.3f} {:>10.0f} {:>10.1f} {:>9.2f} {:>8.3f} {:>9.3f}  {:<16} {}\n",
               plan::precision_label(pt.precision), pt.batch, 1e3 * pt.decode.seconds, pt.tokens_per_s,
               pt.tokens_per_s_per_seq, pt.decode.weight_bytes / 1e9, pt.decode.kv_bytes / 1e9, pt.decode.flops / 1e12,
               pt.decode.path, pt.pareto ? "*" : "");
  fmt::print("  * Pareto-optimal: no other point has a step as short and more tok/s, or a shorter step and as many.\n");
  fmt::print("prefill of one {}-token prompt (steps of at most {} tokens):\n", o.input_len, o.max_num_batched_tokens);
  fmt::print("  {:<11} {:>9} {:>10} {:>9}  {}\n", "precision", "ms", "tok/s", "TFLOP", "linears");
  for (const auto& [p, cost] : prefills)
    fmt::print("  {:<11} {:>9.2f} {:>10.0f} {:>9.2f}  {}\n", plan::precision_label(p), 1e3 * cost.seconds,
               static_cast<double>(o.input_len) / cost.seconds, cost.flops / 1e12, cost.path);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto opts = std::make_shared<PlanCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Predict decode latency and throughput for batch sizes x weight precisions (bf16, FP8 W8A8, W8A16, "
      "W4A16) and the prefill time, from a model's config and a device profile; marks the Pareto points");
  cmd->add_option("model,-m,--model", opts->model,
                  "HF directory (its config.json) or .gguf file (its metadata); weights are never read (default: "
                  "the bundled model)");
  cmd->add_option("--device-profile", opts->device_profile, "built-in device constants: h200 (default)")
      ->check(CLI::IsMember(plan::device_profile_names()));
  cmd->add_option("--bandwidth-gbs", opts->bandwidth_gbs, "override the profile's HBM bandwidth, GB/s")
      ->check(kPositive);
  cmd->add_option("--bf16-tflops", opts->bf16_tflops, "override the profile's dense bf16 peak, TFLOP/s")
      ->check(kPositive);
  cmd->add_option("--fp8-tflops", opts->fp8_tflops, "override the profile's dense FP8 peak, TFLOP/s")
      ->check(kPositive);
  cmd->add_option("--step-overhead-us", opts->step_overhead_us,
                  "override the profile's fixed cost of a decode step outside its kernels, us")
      ->check(kNonNegative);
  cmd->add_option("--batch-sizes", opts->batch_sizes, "decode batch sizes (default 1,4,16,64,256)")
      ->delimiter(',')
      ->check(kPositive);
  cmd->add_option("--precisions", opts->precisions, "weight precisions: bf16, fp8, int8, awq (default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"bf16", "none", "fp8", "int8", "awq"}));
  cmd->add_option("--context-len", opts->context_len, "tokens of context each decoding sequence attends (default 128)")
      ->check(kPositive);
  cmd->add_option("--input-len", opts->input_len, "prompt tokens of the prefill prediction (default 1024)")
      ->check(kPositive);
  cmd->add_option("--max-num-batched-tokens", opts->max_num_batched_tokens,
                  "largest prefill step, as the engine's token budget (default 2048)")
      ->check(kPositive);
  cmd->add_option("--kv-cache-dtype", opts->kv_cache_dtype, "auto (bf16) | fp8")->check(CLI::IsMember({"auto", "fp8"}));
  cmd->add_option("--quantize-lm-head", opts->quantize_lm_head,
                  "none | fp8 | int8 | w4: the output projection in FP8 W8A8, W8A16 or W4A16 g128 (otherwise bf16 "
                  "whatever the layers)")
      ->check(CLI::IsMember({"none", "fp8", "int8", "w4"}));
  cmd->add_flag("--json", opts->json, "print the prediction as JSON");
  cmd->callback([opts] { run_plan(*opts); });
}

}  // namespace pagoda::cli
